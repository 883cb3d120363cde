//! The network between a primary and its standby, as a relay of idem's own: WAL that takes a while to cross, and a cut that loses what was on its way.
//!
//! The standby's `primary_conninfo` points at this relay's socket instead
//! of the primary's. Bytes from the standby (its requests, its replies
//! saying how far it has replayed) cross at once; bytes from the primary
//! (the WAL) are held for the link's delay, as they would be between two
//! sites. [`Link::cut`] is a network partition: every connection is
//! dropped with whatever WAL it still held, and no new one is let through.
//! Lesson 10's failover needs the cut to be certain, not a matter of
//! microseconds: with a delay longer than the race, everything the race
//! wrote is still on the link when it is cut.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::{AbortHandle, JoinSet};

use super::os_user::{OsUser, chown_tree};

/// At most this many connections cross the link at once: the standby's
/// WAL receiver needs one.
const MAX_CONNECTIONS: usize = 4;

/// WAL read from the primary at a time.
const CHUNK: usize = 16 * 1024;

/// Chunks one connection may hold back: with [`CHUNK`], 64 MiB at most;
/// past that the primary's sender waits, as it would on a full network.
const HELD_CHUNKS: usize = 4096;

/// How long connecting to the primary's socket may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// A running link. Dropping it cuts it.
#[derive(Debug)]
pub struct Link {
    dir: PathBuf,
    shared: Arc<Shared>,
    relay: AbortHandle,
}

impl Link {
    /// Listens in `dir` on the same port as the primary's socket
    /// `primary` (`.../.s.PGSQL.5432`), relaying to it. `dir` and the
    /// socket belong to `user`, the standby's, whose supervisor removes
    /// them with its run directory.
    pub fn open(primary: &Path, dir: &Path, delay: Duration, user: Option<OsUser>) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not make the link's directory {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        let name = primary
            .file_name()
            .context("the primary's socket has no file name")?;
        let socket = dir.join(name);
        let listener = UnixListener::bind(&socket)
            .with_context(|| format!("could not listen on {}", socket.display()))?;
        // The standby may run as another user (the cluster's, when idem is
        // root); the directory around it is idem's private run directory.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777))?;
        if let Some(user) = user {
            chown_tree(dir, user)?;
        }
        let shared = Arc::new(Shared::default());
        let relay = tokio::spawn(accept(
            listener,
            primary.to_path_buf(),
            delay,
            shared.clone(),
        ))
        .abort_handle();
        Ok(Link {
            dir: dir.to_path_buf(),
            shared,
            relay,
        })
    }

    /// The directory of the link's socket: the standby's `host`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Cuts the link: every connection across it drops, with what it still
    /// held, and none is let through again. Returns the bytes of WAL that
    /// were on their way and now never arrive.
    pub async fn cut(&self) -> u64 {
        self.shared.cut.store(true, Ordering::SeqCst);
        self.relay.abort();
        // An aborted task drops its connections at its next await; give
        // the runtime a turn to do so before the standby is promoted.
        tokio::task::yield_now().await;
        self.shared.in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.relay.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the link's tasks share with it.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes from the primary read but not yet handed to the standby, over
    /// the connections still open.
    in_flight: AtomicU64,
    /// Set once the link is cut: nothing more is handed over.
    cut: std::sync::atomic::AtomicBool,
}

/// Takes the standby's connections and relays each one; its pumps die with
/// it, since the set that holds them is dropped when this task is aborted.
async fn accept(listener: UnixListener, primary: PathBuf, delay: Duration, shared: Arc<Shared>) {
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut pumps = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = pumps.join_next(), if !pumps.is_empty() => continue,
        };
        let Ok((standby, _)) = accepted else {
            continue;
        };
        let Ok(permit) = room.clone().try_acquire_owned() else {
            // Over the cap: the connection is refused by closing it.
            continue;
        };
        let connected = tokio::time::timeout(CONNECT_LIMIT, UnixStream::connect(&primary)).await;
        let Ok(Ok(server)) = connected else {
            continue;
        };
        let shared = shared.clone();
        pumps.spawn(async move {
            relay(standby, server, delay, shared).await;
            drop(permit);
        });
    }
}

/// One connection across the link, until either side closes it.
async fn relay(standby: UnixStream, server: UnixStream, delay: Duration, shared: Arc<Shared>) {
    let (mut from_standby, mut to_standby) = standby.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let (held, mut arriving) = mpsc::channel::<(Instant, Vec<u8>)>(HELD_CHUNKS);
    // What this connection holds, taken off the link's count when it
    // closes by itself; a cut leaves it counted: that WAL is lost.
    let mine = Arc::new(Held {
        bytes: AtomicU64::new(0),
        shared,
    });
    let counted = mine.clone();
    // The WAL's way: read as soon as the primary sends it...
    let send = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from_server.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            counted.add(n as u64);
            if held
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .await
                .is_err()
            {
                return;
            }
        }
    };
    // ...and handed over once the delay has passed.
    let deliver = async move {
        while let Some((due, bytes)) = arriving.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if mine.shared.cut.load(Ordering::SeqCst) || to_standby.write_all(&bytes).await.is_err()
            {
                return;
            }
            mine.sub(bytes.len() as u64);
        }
    };
    // The standby's way, at once.
    let reply = async move {
        let _ = tokio::io::copy(&mut from_standby, &mut to_server).await;
    };
    tokio::select! {
        _ = async { tokio::join!(send, deliver) } => {}
        _ = reply => {}
    }
}

/// The bytes one connection holds, counted in the link's total too.
struct Held {
    bytes: AtomicU64,
    shared: Arc<Shared>,
}

impl Held {
    fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::SeqCst);
        self.shared.in_flight.fetch_add(n, Ordering::SeqCst);
    }

    fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::SeqCst);
        self.shared.in_flight.fetch_sub(n, Ordering::SeqCst);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.shared.cut.load(Ordering::SeqCst) {
            let left = self.bytes.load(Ordering::SeqCst);
            self.shared.in_flight.fetch_sub(left, Ordering::SeqCst);
        }
    }
}
