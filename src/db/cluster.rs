//! The disposable PostgreSQL cluster idem starts when given no database URL.
//!
//! Each run copies the cached template into a private directory and starts
//! `postgres` there on a unix socket only. The server is not started by idem
//! directly but by a tiny supervisor shell whose standard input is a pipe from
//! idem: when idem closes that pipe, or dies in any way at all (even
//! `kill -9`), the supervisor reads end-of-file, stops the server and removes
//! the directory. So no run, however it ends, leaves a server or files behind.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::binaries::PgBinaries;
use super::child::check_stop;
use super::leftovers::{self, alive};
use super::os_user::{chown_tree, cluster_user};
use super::template::{self, Template, copy_tree, private_dir};

/// The connections the cluster allows: room for a pool of 150 plus bookkeeping.
pub const MAX_CONNECTIONS: u32 = 200;

/// How long the server may take to accept connections before idem gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The supervisor: starts postgres, prints its pid, then waits for its
/// standard input to close, stops postgres with SIGINT (a fast shutdown) and
/// removes the run directory. `$1` is the postgres binary, `$2` the run
/// directory, the rest postgres's own arguments.
///
/// Two traps of `sh` are closed here. A reader that is gone (idem killed
/// before it read the pid) must not kill the supervisor with SIGPIPE, so
/// SIGPIPE is ignored. And a background job starts with SIGINT ignored until
/// postgres installs its own handler, so a stop sent in its first
/// milliseconds would be lost: SIGINT is repeated until postgres is gone.
const SUPERVISOR: &str = r#"
trap '' PIPE
pg=$1; run=$2; shift 2
"$pg" "$@" >"$run/postgres.log" 2>&1 </dev/null &
server=$!
echo $server
exec >/dev/null 2>&1
cat >/dev/null
( while kill -INT "$server"; do sleep 0.05; done ) &
repeater=$!
wait "$server"
kill "$repeater"
rm -rf "$run"
"#;

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
}

/// A running disposable cluster. Dropping it stops it and removes its files.
#[derive(Debug)]
pub struct Cluster {
    pub bins: PgBinaries,
    pub template: Template,
    /// The private run directory; it also holds the unix socket.
    pub run_dir: PathBuf,
    /// The postmaster's process id.
    pub pid: u32,
    /// Who runs the server, when idem runs as root; `None`: idem's own user.
    pub user: Option<super::os_user::OsUser>,
    /// From the start of the copy to the server accepting connections.
    pub start_time: Duration,
    supervisor: Option<Child>,
    pipe: Option<ChildStdin>,
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
        let prepared = copy_tree(&template.dir, &data).and_then(|()| match user {
            Some(user) => chown_tree(&run_dir, user),
            None => Ok(()),
        });
        if let Err(err) = prepared {
            let _ = fs::remove_dir_all(&run_dir);
            return Err(err);
        }

        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(SUPERVISOR)
            .arg("idem-supervisor")
            .arg(bins.postgres())
            .arg(&run_dir)
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&run_dir)
            .args(server_settings())
            .args(opts.server_settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C at the terminal reaches idem
            // alone, and idem decides how the server stops.
            .process_group(0);
        if let Some(user) = user {
            cmd.uid(user.uid).gid(user.gid);
        }
        let mut supervisor = match cmd.spawn() {
            Ok(child) => child,
            Err(err) => {
                let _ = fs::remove_dir_all(&run_dir);
                return Err(err).context("could not start the cluster's supervisor (/bin/sh)");
            }
        };
        let pipe = supervisor.stdin.take();
        let mut cluster = Cluster {
            bins,
            template,
            run_dir,
            pid: 0,
            user,
            start_time: Duration::ZERO,
            supervisor: Some(supervisor),
            pipe,
        };
        // From here on, dropping `cluster` on an error cleans everything up.
        cluster.pid = cluster.read_pid()?;
        cluster.wait_until_ready()?;
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
        self.shut_down()?;
        Ok(began.elapsed())
    }

    fn read_pid(&mut self) -> Result<u32> {
        let out = self
            .supervisor
            .as_mut()
            .and_then(|s| s.stdout.take())
            .context("the supervisor has no output pipe")?;
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        line.trim()
            .parse()
            .with_context(|| format!("the supervisor did not report a server pid ({line:?})"))
    }

    /// Polls `postmaster.pid` until the server says it is ready, as `pg_ctl` does.
    fn wait_until_ready(&self) -> Result<()> {
        let pid_file = self.run_dir.join("data").join("postmaster.pid");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            check_stop()?;
            if let Ok(text) = fs::read_to_string(&pid_file)
                && text.lines().nth(7).map(str::trim) == Some("ready")
            {
                return Ok(());
            }
            if !alive(self.pid) {
                bail!("PostgreSQL did not start: {}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!(
                    "PostgreSQL did not accept connections within {} s: {}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The server log's last meaningful line, for error messages.
    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.run_dir.join("postgres.log")).unwrap_or_default();
        log.lines()
            .rfind(|l| l.contains("FATAL") || l.contains("ERROR"))
            .or_else(|| log.lines().rfind(|l| !l.trim().is_empty()))
            .unwrap_or("no log written")
            .trim()
            .to_string()
    }

    fn shut_down(&mut self) -> Result<()> {
        // Closing the pipe is the stop signal; the supervisor does the rest.
        drop(self.pipe.take());
        if let Some(mut supervisor) = self.supervisor.take() {
            supervisor
                .wait()
                .context("could not wait for the cluster to stop")?;
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// The server's settings: a socket only, and no durability, since every
/// cluster is thrown away (as pg_tmp and testing.postgresql do). Dynamic
/// shared memory lives in files inside the data directory (`mmap`), not in
/// `/dev/shm/PostgreSQL.*` segments a killed server would leave behind:
/// removing the run directory removes it all.
fn server_settings() -> Vec<String> {
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
