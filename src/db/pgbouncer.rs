//! A real PgBouncer in transaction mode in front of the disposable cluster, started and removed with the run.
//!
//! Found like the PostgreSQL binaries (`--pgbouncer-bin`, `PATH`, Debian's
//! `/usr/sbin`), it runs as the cluster's user (PgBouncer, like PostgreSQL,
//! refuses root), in a directory inside the cluster's run directory, on a
//! unix socket there only. It dies with idem (the parent-death signal, so
//! `kill -9` included), and its directory goes with the cluster's.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::child::die_with_parent;
use super::os_user::OsUser;
use crate::files::write;

/// The port number in the socket's name (`.s.PGSQL.6432`); no TCP port is opened.
pub const PORT: u16 = 6432;

/// The server connections PgBouncer keeps per database and user in front
/// of a race (`default_pool_size`): its own default, 20.
pub const POOL_SIZE: u32 = 20;

/// The client connections PgBouncer takes (`max_client_conn`): its default
/// of 100 would turn away the pooled connections of a large app pool.
pub const MAX_CLIENTS: usize = 1000;

/// How long PgBouncer may take to open its socket.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running PgBouncer. Dropping it stops it and removes its directory.
pub struct Bouncer {
    pub(crate) dir: PathBuf,
    child: Child,
}

impl std::fmt::Debug for Bouncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bouncer({})", self.dir.display())
    }
}

/// Where PgBouncer is: the directory given, else `PATH`, else Debian's place.
pub fn locate(bin: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = bin {
        let program = if dir.is_dir() {
            dir.join("pgbouncer")
        } else {
            dir.to_path_buf()
        };
        if program.is_file() {
            return Ok(program);
        }
        bail!("--pgbouncer-bin {}: no pgbouncer there", dir.display());
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("pgbouncer"));
    on_path
        .chain([PathBuf::from("/usr/sbin/pgbouncer")])
        .find(|p| p.is_file())
        .context(
            "PgBouncer is not installed (Debian: apt-get install pgbouncer); \
             or give --pgbouncer-bin",
        )
}

/// PgBouncer's `auth_file`: who it lets in, all without a password
/// (`auth_type = trust`, on a socket in idem's private run directory).
fn users_file(users: &[&str]) -> String {
    users.iter().map(|u| format!("\"{u}\" \"\"\n")).collect()
}

/// The most of PgBouncer's log read for a message.
const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// The cluster PgBouncer stands in front of: where it runs and as whom.
#[derive(Debug, Clone, Copy)]
pub struct Front<'a> {
    /// The cluster's run directory; PgBouncer's goes inside it.
    pub run_dir: &'a Path,
    /// The cluster's unix socket directory.
    pub server_socket: &'a Path,
    /// The cluster's user, when idem runs as root.
    pub user: Option<OsUser>,
}

impl Bouncer {
    /// Starts PgBouncer in transaction mode in front of a cluster, with
    /// `server_connections` connections to it at most, letting in the
    /// cluster's superuser and `guard_role` (see [`super::guard_role`]).
    pub fn start(
        program: &Path,
        cluster: Front<'_>,
        server_connections: u32,
        guard_role: Option<&str>,
    ) -> Result<Self> {
        // A directory of its own for each, so that one stopped (and its
        // directory removed) leaves any other in front of the cluster be.
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = cluster.run_dir.join(format!("pgbouncer-{n}"));
        write::make_dirs(&dir, 0o700, "PgBouncer's directory")?;
        let ini = dir.join("pgbouncer.ini");
        let ini_text = config(&dir, cluster.server_socket, server_connections);
        write::replace(&ini, ini_text.as_bytes(), "PgBouncer's settings")?;
        let mut users = vec!["postgres"];
        users.extend(guard_role);
        let users = users_file(&users);
        write::replace(
            &dir.join("users.txt"),
            users.as_bytes(),
            "PgBouncer's users",
        )?;
        let mut cmd = Command::new(program);
        cmd.arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(user) = cluster.user {
            for path in [&dir, &ini, &dir.join("users.txt")] {
                std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))?;
            }
            cmd.uid(user.uid).gid(user.gid);
        }
        let child = die_with_parent(&mut cmd)
            .spawn()
            .with_context(|| format!("could not start {}", program.display()))?;
        let mut bouncer = Bouncer { dir, child };
        bouncer.wait_until_ready()?;
        Ok(bouncer)
    }

    /// How a client reaches PostgreSQL through this PgBouncer.
    pub fn client_config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(PORT)
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(10));
        config
    }

    fn wait_until_ready(&mut self) -> Result<()> {
        let socket = self.dir.join(format!(".s.PGSQL.{PORT}"));
        let deadline = Instant::now() + READY_TIMEOUT;
        while !socket.exists() {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("PgBouncer exited ({status}): {}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!("PgBouncer did not listen within 10 s: {}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// The last line PgBouncer logged, for a message.
    pub fn log_tail(&self) -> String {
        let log = self.dir.join("pgbouncer.log");
        crate::files::read_text(&log, MAX_LOG_BYTES, "PgBouncer's log")
            .ok()
            .and_then(|log| log.lines().last().map(str::to_string))
            .unwrap_or_else(|| "it logged nothing".to_string())
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        // SAFETY: signals our own child, whose pid we hold until we reap it.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// PgBouncer's settings: transaction pooling, its defaults otherwise, on a
/// unix socket in `dir` only, trusting the cluster's local socket.
fn config(dir: &Path, server_socket: &Path, server_connections: u32) -> String {
    let dir = dir.display();
    format!(
        "[databases]\n\
         postgres = host={} dbname=postgres user=postgres\n\
         [pgbouncer]\n\
         listen_addr =\n\
         unix_socket_dir = {dir}\n\
         listen_port = {PORT}\n\
         auth_type = trust\n\
         auth_file = {dir}/users.txt\n\
         pool_mode = transaction\n\
         default_pool_size = {server_connections}\n\
         max_client_conn = {MAX_CLIENTS}\n\
         logfile = {dir}/pgbouncer.log\n\
         pidfile = {dir}/pgbouncer.pid\n",
        server_socket.display()
    )
}
