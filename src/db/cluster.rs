//! The disposable PostgreSQL cluster idem starts when given no database URL.
//!
//! Each run copies the cached template into a private directory and starts
//! `postgres` there on a unix socket only, under idem's supervisor
//! (`supervised.rs`): so no run, however it ends, leaves a server or files
//! behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::binaries::PgBinaries;
use super::leftovers;
use super::os_user::{chown_tree, cluster_user};
use super::supervised::Supervised;
use super::template::{self, Template, copy_tree, private_dir};

/// The connections the cluster allows: room for a pool of 150 plus bookkeeping.
pub const MAX_CONNECTIONS: u32 = 200;

/// How to start a cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `--pg-bin`: where `initdb` and `postgres` are; found if `None`.
    pub pg_bin: Option<PathBuf>,
    /// `--pg-user`: who runs the server when idem runs as root.
    pub pg_user: Option<String>,
    /// Where the initdb template is cached; the user's cache directory if `None`.
    pub template_cache: Option<PathBuf>,
    /// More `name=value` server settings, after idem's own (which they can
    /// override): how a test starts a server that listens on TCP with TLS.
    pub server_settings: Vec<String>,
    /// `--pgbouncer-bin`: where PgBouncer is, for `--via pgbouncer`; found if `None`.
    pub pgbouncer_bin: Option<PathBuf>,
    /// `--mariadb-bin`: where MariaDB is, for a scenario on that engine.
    pub mariadb_bin: Option<PathBuf>,
}

/// A running disposable cluster. Dropping it stops it and removes its files.
#[derive(Debug)]
pub struct Cluster {
    pub bins: PgBinaries,
    pub(crate) template: Template,
    /// The private run directory; it also holds the unix socket.
    pub run_dir: PathBuf,
    /// Who runs the server, when idem runs as root; `None`: idem's own user.
    pub(crate) user: Option<super::os_user::OsUser>,
    /// The token in its data directory that proves it idem's (see
    /// [`super::ownership`]).
    pub(crate) token: String,
    /// From the start of the copy to the server accepting connections.
    pub(crate) start_time: Duration,
    server: Supervised,
}

impl Cluster {
    /// Starts a fresh cluster and waits until it accepts connections.
    pub fn start(opts: &ClusterOptions) -> Result<Self> {
        let bins = PgBinaries::locate(opts.pg_bin.as_deref())?;
        let user = cluster_user(opts.pg_user.as_deref())?;
        let cache = match opts.template_cache.clone() {
            Some(cache) => cache,
            None => super::cache_dir::cache_dir()?,
        };
        // What killed runs left: initdb staging and benchmark scratch
        // directories, then below, run directories.
        leftovers::sweep(&std::env::temp_dir(), "idem-initdb");
        leftovers::sweep(&std::env::temp_dir(), "idem-bench");
        let template = template::ensure(&bins, user, &cache)?;

        let began = Instant::now();
        let parent = runs_parent();
        leftovers::sweep(&parent, "idem");
        let run_dir = private_dir(&parent, "idem")?;
        let data = run_dir.join("data");
        let prepared = copy_tree(&template.dir, &data)
            .and_then(|()| super::ownership::mark(&data))
            .and_then(|token| match user {
                Some(user) => chown_tree(&run_dir, user).map(|()| token),
                None => Ok(token),
            });
        let token = match prepared {
            Ok(token) => token,
            Err(err) => {
                let _ = fs::remove_dir_all(&run_dir);
                return Err(err);
            }
        };

        let mut settings = server_settings();
        settings.extend(
            opts.server_settings
                .iter()
                .flat_map(|s| ["-c".to_string(), s.clone()]),
        );
        // From here on, dropping `server` on an error cleans everything up.
        let server = Supervised::start(&bins.postgres(), &run_dir, user, &settings, "ready")?;
        let mut cluster = Cluster {
            bins,
            template,
            run_dir,
            user,
            token,
            start_time: Duration::ZERO,
            server,
        };
        cluster.start_time = began.elapsed();
        Ok(cluster)
    }

    /// The directory holding the server's unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Where a PgBouncer in front of this cluster runs, and as whom.
    pub fn front(&self) -> super::pgbouncer::Front<'_> {
        super::pgbouncer::Front {
            run_dir: &self.run_dir,
            server_socket: self.socket_dir(),
            user: self.user,
        }
    }

    /// Stops the server, removes the run directory, and says how long it took.
    pub fn stop(mut self) -> Result<Duration> {
        let began = Instant::now();
        self.server.shut_down()?;
        Ok(began.elapsed())
    }
}

/// The server's settings: a socket only, and no durability, since every
/// cluster is thrown away (as pg_tmp and testing.postgresql do). Dynamic
/// shared memory lives in files inside the data directory (`mmap`), not in
/// `/dev/shm/PostgreSQL.*` segments a killed server would leave behind:
/// removing the run directory removes it all.
/// The cluster's port: PostgreSQL's default, given nowhere. Over a unix
/// socket it is only the socket's name, `.s.PGSQL.5432`.
pub const PORT: u16 = 5432;

pub(super) fn server_settings() -> Vec<String> {
    [
        "listen_addresses=".to_string(),
        "fsync=off".to_string(),
        "synchronous_commit=off".to_string(),
        "full_page_writes=off".to_string(),
        "dynamic_shared_memory_type=mmap".to_string(),
        format!("max_connections={MAX_CONNECTIONS}"),
    ]
    .into_iter()
    .flat_map(|setting| ["-c".to_string(), setting])
    .collect()
}

/// Where run directories go: `TMPDIR` when the user set it; else
/// `/dev/shm` where it exists, since a cluster that is thrown away anyway
/// starts faster in memory (copying the template to ext4 takes 0.2–0.5 s,
/// to tmpfs 0.05 s); else the system's temporary directory.
pub fn runs_parent() -> PathBuf {
    if std::env::var_os("TMPDIR").is_some_and(|t| !t.is_empty()) {
        return std::env::temp_dir();
    }
    let shm = Path::new("/dev/shm");
    let writable = std::ffi::CString::new("/dev/shm")
        // SAFETY: the path is a valid NUL-terminated string.
        .map(|p| unsafe { libc::access(p.as_ptr(), libc::W_OK | libc::X_OK) } == 0)
        .unwrap_or(false);
    if shm.is_dir() && writable {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}
