//! The front door of `--replicas`: one port that hands each new connection to the next live replica in turn, as a round-robin load balancer does.
//!
//! Bytes are copied as they come, both ways, through fixed buffers. The
//! front door keeps the bounds of the processes behind it by leaving them
//! to those processes: a replica that cuts a stalled request or an idle
//! connection closes its side, and the front door then closes the
//! client's, so its timeouts mean what serve's mean (a request a replica
//! is still working on is not idle). What it bounds itself:
//! - its connections: past the cap (each forwarded connection holds two
//!   descriptors here) a new one is answered `503` and closed;
//! - a client that takes none of its answer for the idle timeout;
//! - a replica that has exited (seen when its process ends, or when a
//!   connection to it fails): no connection goes to its port again, where
//!   anyone might listen by now; a client whose request it dropped gets a
//!   `502` naming it, the others are served by the live ones, and stderr
//!   says so once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::listener::{OVER_CAP, raw_problem};

/// How many bytes each direction of a connection holds at once.
const BUFFER: usize = 16 * 1024;

/// How long a replica may take to accept a forwarded connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long after a replica closed a connection unanswered its exit is
/// looked for (a process's sockets close before it is seen to exit).
const DYING: Duration = Duration::from_millis(200);

/// One process behind the front door.
pub struct Backend {
    /// Its number among the replicas, as its answers name it.
    number: usize,
    addr: SocketAddr,
    /// Its process: a child of this one, so its id is not reused before
    /// it is reaped, and whether it has exited can be asked by id.
    pid: u32,
    down: AtomicBool,
}

impl Backend {
    pub fn new(number: usize, addr: SocketAddr, pid: u32) -> Self {
        Self {
            number,
            addr,
            pid,
            down: AtomicBool::new(false),
        }
    }

    /// Whether it has exited or failed a connection; said once, on stderr,
    /// the first time it is found so.
    fn is_down(&self) -> bool {
        if self.down.load(Ordering::Acquire) {
            return true;
        }
        if exited(self.pid) {
            self.mark_down("has exited");
            return true;
        }
        false
    }

    /// Whether a replica that closed a connection without a byte was
    /// dying: its sockets close before its exit can be seen, so the exit
    /// is looked for a little while.
    async fn died_just_now(&self) -> bool {
        let deadline = tokio::time::Instant::now() + DYING;
        loop {
            if self.is_down() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn mark_down(&self, why: &str) {
        if !self.down.swap(true, Ordering::AcqRel) {
            let said = format!(
                "idem: replica {} (process {}, port {}) {why}; no connection goes to it any more, \
                 the others serve",
                self.number,
                self.pid,
                self.addr.port()
            );
            // stderr may be a full pipe: the front door never waits on it.
            tokio::task::spawn_blocking(move || eprintln!("{said}"));
        }
    }
}

/// Whether child process `pid` has exited (without reaping it).
fn exited(pid: u32) -> bool {
    // SAFETY: waitid writes into the siginfo it is given; WNOWAIT leaves
    // the child to be reaped by its owner.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let asked = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        asked == 0 && info.si_pid() != 0
    }
}

/// Where the front door sends connections, and its bounds.
pub struct Backends {
    pub(crate) replicas: Vec<Backend>,
    /// Connections open at once, at most.
    pub(crate) cap: usize,
    /// A client that takes none of its answer for this long is cut.
    pub(crate) idle: Duration,
}

impl Backends {
    /// The next live replica after `start`, in turn.
    fn next_live(&self, next: &AtomicUsize) -> Option<usize> {
        let n = self.replicas.len();
        (0..n)
            .map(|_| next.fetch_add(1, Ordering::Relaxed) % n)
            .find(|&i| !self.replicas[i].is_down())
    }
}

/// Accepts on `listener` until dropped, handing each connection to the
/// next live replica.
pub async fn round_robin(listener: TcpListener, backends: Backends) {
    let backends = Arc::new(backends);
    let next = AtomicUsize::new(0);
    let open = Arc::new(Semaphore::new(backends.cap.max(1)));
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors, say: let a connection close first.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            // Best effort: a client that cannot take 200 bytes now gets a close.
            let _ = client.try_write(&OVER_CAP);
            continue;
        };
        let backends = backends.clone();
        let Some(i) = backends.next_live(&next) else {
            let _ = client.try_write(&raw_problem(
                502,
                "no_replica",
                "every replica of the app has exited",
            ));
            continue;
        };
        tokio::spawn(async move {
            forward(client, &backends.replicas[i], backends.idle).await;
            drop(permit);
        });
    }
}

/// One client's connection, forwarded to `backend`.
async fn forward(mut client: TcpStream, backend: &Backend, idle: Duration) {
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend.addr));
    let upstream = match connected.await {
        Ok(Ok(upstream)) => upstream,
        _ => {
            backend.mark_down("refused a connection");
            let _ = client.write_all(&gone(backend)).await;
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, mut client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    // The replica's side ending ends the connection: it has answered, or
    // cut the client (a stalled request, an idle connection), or died.
    // The client's side ending (a half-close) only ends its direction.
    let answered = tokio::select! {
        answered = copy(upstream_read, &mut client_write, Some(idle)) => answered,
        () = async {
            let mut upstream_write = upstream_write;
            copy(client_read, &mut upstream_write, None).await;
            let _ = upstream_write.shutdown().await;
            std::future::pending::<()>().await
        } => 0,
    };
    // A replica that died before it said anything leaves its clients a 502.
    if answered == 0 && backend.died_just_now().await {
        let _ = client_write.write_all(&gone(backend)).await;
    }
    let _ = client_write.shutdown().await;
}

/// The 502 for a client whose replica is gone.
fn gone(backend: &Backend) -> Vec<u8> {
    raw_problem(
        502,
        "replica_gone",
        &format!(
            "replica {} of the app has exited; send the request again",
            backend.number
        ),
    )
}

/// Copies `from` to `to` until `from` ends; a write that takes longer than
/// `stalled` (a reader that takes nothing) ends it too. Returns the bytes
/// copied.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    stalled: Option<Duration>,
) -> usize {
    let mut buffer = vec![0u8; BUFFER];
    let mut copied = 0;
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return copied,
            Ok(n) => {
                let write = to.write_all(&buffer[..n]);
                let written = match stalled {
                    Some(limit) => tokio::time::timeout(limit, write).await.ok(),
                    None => Some(write.await),
                };
                if !matches!(written, Some(Ok(()))) {
                    return copied;
                }
                copied += n;
            }
        }
    }
}
