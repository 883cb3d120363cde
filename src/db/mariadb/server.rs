//! The disposable MariaDB server idem starts for `--engine mariadb`, made and removed as the PostgreSQL cluster is.
//!
//! `mariadb-install-db` runs once per server version into a cached
//! template; each run copies it into a private run directory (in
//! `/dev/shm` where there is one) and starts `mariadbd` there under the
//! same supervisor as PostgreSQL (`db/supervised.rs`): a Unix socket of its
//! own and no TCP port, no binary log, no durability. However idem ends
//! (Ctrl-C, SIGTERM, `kill -9`), the supervisor kills the server and
//! removes the run directory; a run killed while the template was made
//! leaves a staging directory, which the next run sweeps.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::db::child::{self, check_stop};
use crate::db::cluster::runs_parent;
use crate::db::leftovers;
use crate::db::os_user::{OsUser, chown_tree, server_user};
use crate::db::supervised::{Launch, Supervised};
use crate::db::template::{copy_tree, private_dir, store};
use crate::files::owners::alive;

/// Bumped whenever the install's flags change, so an old template is not reused.
const LAYOUT: &str = "v1";

/// How long `mariadb-install-db` may take (under a second here).
const INSTALL_LIMIT: Duration = Duration::from_secs(120);

/// How long the server may take to take connections (0.1 s here).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The connections the server allows: a pool of 150 and bookkeeping.
pub const MAX_CONNECTIONS: u32 = 200;

/// The name of the run directories and of the template's staging
/// directories, as the sweep finds them.
const RUN_PREFIX: &str = "idem-mariadb";
const STAGING_PREFIX: &str = "idem-mariadb-install";

/// The programs a MariaDB server is made and run with.
#[derive(Debug, Clone)]
pub struct MariadbBinaries {
    pub server: PathBuf,
    pub install: PathBuf,
    /// `10.11.19-MariaDB-0+deb12u1`, as `mariadbd --version` says it.
    pub version: String,
}

impl MariadbBinaries {
    /// `mariadbd` and `mariadb-install-db` in `dir` (`--mariadb-bin`),
    /// else where Debian puts them, else on the PATH.
    pub fn locate(dir: Option<&Path>) -> Result<Self> {
        let find = |name: &str, places: &[&str]| -> Result<PathBuf> {
            if let Some(dir) = dir {
                let path = dir.join(name);
                return match path.is_file() {
                    true => Ok(path),
                    false => bail!("--mariadb-bin {}: no {name} there", dir.display()),
                };
            }
            let path_dirs = std::env::var_os("PATH").unwrap_or_default();
            places
                .iter()
                .map(PathBuf::from)
                .chain(std::env::split_paths(&path_dirs))
                .map(|d| d.join(name))
                .find(|p| p.is_file())
                .with_context(|| {
                    format!("no {name} found (install mariadb-server, or pass --mariadb-bin DIR)")
                })
        };
        let server = find("mariadbd", &["/usr/sbin", "/usr/libexec"])?;
        let install = find("mariadb-install-db", &["/usr/bin", "/usr/sbin"])?;
        let out = child::output(
            Command::new(&server).arg("--version"),
            "mariadbd --version",
            Duration::from_secs(10),
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .split_whitespace()
            .skip_while(|w| *w != "Ver")
            .nth(1)
            .filter(|v| {
                v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-+~_".contains(c))
            })
            .with_context(|| format!("{} --version said no version", server.display()))?
            .to_string();
        Ok(Self {
            server,
            install,
            version,
        })
    }
}

/// A running disposable MariaDB. Dropping it kills the server and removes
/// its files.
#[derive(Debug)]
pub struct MariadbServer {
    pub bins: MariadbBinaries,
    /// The server's Unix socket.
    pub socket: PathBuf,
    /// Whether this start made the template (a cold start).
    pub made_template: bool,
    server: Supervised,
}

impl MariadbServer {
    /// Starts a fresh server from the cached template (made first if
    /// needed) and waits until it takes connections.
    pub fn start(bin: Option<&Path>, cache: Option<&Path>) -> Result<Self> {
        Self::start_with(bin, cache, |_| Vec::new())
    }

    /// The same, with `more` of the server's settings (a Galera node's),
    /// made for the run directory they are given.
    pub fn start_with(
        bin: Option<&Path>,
        cache: Option<&Path>,
        more: impl FnOnce(&Path) -> Vec<String>,
    ) -> Result<Self> {
        let bins = MariadbBinaries::locate(bin)?;
        let user = server_user("mysql", "MariaDB")?;
        let cache = match cache {
            Some(cache) => cache.to_path_buf(),
            None => crate::db::cache_dir::cache_dir()?,
        };
        leftovers::sweep(&std::env::temp_dir(), STAGING_PREFIX);
        let (template, made_template) = ensure_template(&bins, user, &cache)?;

        let parent = runs_parent();
        leftovers::sweep(&parent, RUN_PREFIX);
        let run_dir = private_dir(&parent, RUN_PREFIX)?;
        let prepared = copy_tree(&template, &run_dir.join("data"))
            .and_then(|()| fs::create_dir(run_dir.join("tmp")).map_err(Into::into))
            .and_then(|()| user.map_or(Ok(()), |u| chown_tree(&run_dir, u)));
        if let Err(err) = prepared {
            let _ = fs::remove_dir_all(&run_dir);
            return Err(err);
        }
        let socket = run_dir.join("mariadb.sock");
        let mut args = server_args(&run_dir);
        args.extend(more(&run_dir).into_iter().map(Into::into));
        let launch = Launch {
            program: &bins.server,
            log: "mariadb.log",
            // The files go next: nothing to flush.
            stop_signal: "KILL",
            // A Galera node runs its state transfers as scripts of its
            // own (rsync and its daemon), which must not outlive it.
            with_children: true,
            args,
        };
        // From here on, dropping `server` on an error cleans everything up.
        let server = Supervised::spawn(&launch, &run_dir, user)?;
        wait_ready(&server, &run_dir)?;
        Ok(Self {
            bins,
            socket,
            made_template,
            server,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Kills the server, removes its run directory, and says how long it took.
    pub fn stop(mut self) -> Result<Duration> {
        let began = Instant::now();
        self.server.shut_down()?;
        Ok(began.elapsed())
    }
}

/// The server's settings: the run directory's socket and nothing on TCP,
/// no durability (the files are thrown away), room for a big pool.
fn server_args(run_dir: &Path) -> Vec<std::ffi::OsString> {
    let at = |name: &str, path: PathBuf| format!("--{name}={}", path.display());
    [
        // First, or the server reads /etc/mysql's files too.
        "--no-defaults".to_string(),
        at("datadir", run_dir.join("data")),
        at("tmpdir", run_dir.join("tmp")),
        at("socket", run_dir.join("mariadb.sock")),
        at("pid-file", run_dir.join("mariadb.pid")),
        "--skip-networking".into(),
        "--skip-name-resolve".into(),
        "--innodb-flush-log-at-trx-commit=0".into(),
        "--innodb-buffer-pool-size=32M".into(),
        "--innodb-log-file-size=8M".into(),
        "--performance-schema=OFF".into(),
        format!("--max-connections={MAX_CONNECTIONS}"),
    ]
    .into_iter()
    .map(Into::into)
    .collect()
}

/// Waits until the log says the server takes connections, as `mysqld_safe`
/// does; stops at a signal, a dead server, or the time limit.
fn wait_ready(server: &Supervised, run_dir: &Path) -> Result<()> {
    let log = run_dir.join("mariadb.log");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        check_stop()?;
        let text = fs::read_to_string(&log).unwrap_or_default();
        if text.contains("ready for connections") && run_dir.join("mariadb.sock").exists() {
            return Ok(());
        }
        if !alive(server.pid()) {
            bail!("MariaDB did not start: {}", server.log_tail());
        }
        if Instant::now() > deadline {
            bail!(
                "MariaDB did not take connections within {} s: {}",
                READY_TIMEOUT.as_secs(),
                server.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The cached template for these binaries, made first if needed; whether
/// this call made it.
fn ensure_template(
    bins: &MariadbBinaries,
    user: Option<OsUser>,
    cache: &Path,
) -> Result<(PathBuf, bool)> {
    let dir = cache.join(format!("template-mariadb{}-{LAYOUT}", bins.version));
    let made =
        |dir: &Path| dir.join("mysql").join("user.frm").is_file() || dir.join("ibdata1").is_file();
    leftovers::sweep(cache, ".incoming-mariadb");
    if made(&dir) {
        return Ok((dir, false));
    }
    fs::create_dir_all(cache)
        .with_context(|| format!("could not create the cache directory {}", cache.display()))?;
    let staging = private_dir(&std::env::temp_dir(), STAGING_PREFIX)?;
    let result = install(bins, user, &staging)
        .and_then(|data| store(&data, &dir, ".incoming-mariadb", made));
    let _ = fs::remove_dir_all(&staging);
    Ok((dir, result?))
}

/// Runs `mariadb-install-db` into `staging/data`, as `user` if given.
/// `root@localhost` gets the normal password plugin with no password: the
/// socket it is reached by is in a directory only idem's user may enter.
fn install(bins: &MariadbBinaries, user: Option<OsUser>, staging: &Path) -> Result<PathBuf> {
    let data = staging.join("data");
    let tmp = staging.join("tmp");
    fs::create_dir(&tmp)?;
    if let Some(user) = user {
        chown_tree(staging, user)?;
    }
    let mut cmd = Command::new(&bins.install);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .arg("--innodb-log-file-size=8M");
    if let Some(user) = user {
        cmd.uid(user.uid).gid(user.gid);
    }
    let out = child::output(&mut cmd, "mariadb-install-db", INSTALL_LIMIT)?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let last = said
            .lines()
            .rfind(|l| l.contains("ERROR"))
            .or_else(|| said.lines().rfind(|l| !l.trim().is_empty()))
            .unwrap_or("");
        bail!(
            "mariadb-install-db failed: {}",
            crate::controls::escaped(last.trim())
        );
    }
    Ok(data)
}

/// Kills the server `pid` at once (SIGKILL), as a machine lost: a node of a
/// cluster in the middle of a race. Its supervisor still removes its files.
pub fn kill_now(pid: u32) {
    // SAFETY: a signal to a server process idem started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}
