//! Helpers shared by the integration tests: a private temp directory per
//! test, and checks that a run left nothing behind in it.
#![allow(dead_code)]

pub mod app;
pub mod certs;
pub mod flawed;
pub mod mariadb;
pub mod memory;
pub mod races;
pub mod segments;
pub mod server;
pub mod user_redis;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;

/// Where the tests' sandboxes go: where idem itself puts its run
/// directories (`/dev/shm` when TMPDIR is unset and it can be written, as
/// a cluster's copy of its template takes a tenth of the time in memory
/// that it takes on a disk).
pub fn scratch_parent() -> PathBuf {
    idem::db::cluster::runs_parent()
}

/// A private TMPDIR for one test: every cluster idem starts lives below it.
pub struct Sandbox {
    pub dir: PathBuf,
}

impl Sandbox {
    pub fn new(name: &str) -> Self {
        // Unique within the process too: tests of one binary run in parallel.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The first sandbox arranges the suite's last check: nothing of
        // PostgreSQL's shared memory left behind.
        if n == 0 {
            std::sync::LazyLock::force(&segments::SUITE_BEGAN);
            // SAFETY: `check_at_exit` is an `extern "C" fn()` that only reads
            // /dev/shm and /proc and writes to fd 2.
            unsafe {
                libc::atexit(segments::check_at_exit);
            }
        }
        let dir = scratch_parent().join(format!("idem-test-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Like /tmp: the cluster's own user (postgres, when tests run as root)
        // must be able to create and remove its run directory here.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Self { dir }
    }

    /// The idem binary, isolated in this sandbox, without colour or a database URL.
    pub fn idem(&self) -> Command {
        let mut cmd = Command::cargo_bin("idem").unwrap();
        cmd.env("TMPDIR", &self.dir)
            .env("XDG_STATE_HOME", self.state())
            .env("NO_COLOR", "1")
            .env_remove("DATABASE_URL")
            .env_remove("IDEM_PG_BIN");
        cmd
    }

    /// The same, as a std command (for tests that signal the process).
    pub fn idem_std(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("idem"));
        cmd.env("TMPDIR", &self.dir)
            .env("XDG_STATE_HOME", self.state())
            .env("NO_COLOR", "1")
            .env_remove("DATABASE_URL")
            .env_remove("IDEM_PG_BIN");
        cmd
    }

    /// Runs idem with `args`, kills it (SIGKILL) once at least `up` of its
    /// live servers name `server` (in the sandbox's leftovers, their
    /// supervisors left out), and says
    /// whether it was caught so, still running.
    pub fn killed_with_servers_up(&self, args: &[&str], server: &str, up: usize) -> bool {
        let mut idem = self
            .idem_std()
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let servers = || {
            self.leftovers()
                .iter()
                .filter(|l| l.starts_with("process") && l.contains(server))
                // The supervisor's shell names the server too.
                .filter(|l| !l.contains("idem-supervisor"))
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while servers() < up && Instant::now() < deadline && idem.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let caught = servers() >= up && idem.try_wait().unwrap().is_none();
        let _ = idem.kill();
        idem.wait().unwrap();
        caught
    }

    /// What idem left in the sandbox: directories and live processes.
    pub fn leftovers(&self) -> Vec<String> {
        let mut found: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .flatten()
            .map(|e| format!("file {}", e.path().display()))
            .collect();
        found.extend(
            processes_mentioning(&self.dir)
                .into_iter()
                .map(|p| format!("process {p}")),
        );
        found
    }

    /// Waits up to `limit` for the sandbox to be empty; returns what is left.
    pub fn wait_clean(&self, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = self.leftovers();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The run directory of a cluster once its server is ready, if one appears within `limit`.
    pub fn wait_for_ready_cluster(&self, limit: Duration) -> Option<PathBuf> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            for entry in std::fs::read_dir(&self.dir).unwrap().flatten() {
                let pid_file = entry.path().join("data").join("postmaster.pid");
                if let Ok(text) = std::fs::read_to_string(pid_file)
                    && text.lines().nth(7).map(str::trim) == Some("ready")
                {
                    return Some(entry.path());
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(self.state());
    }
}

impl Sandbox {
    /// The learner's state directory for this sandbox's idem (its
    /// progress), beside the sandbox so that it is no leftover in it.
    pub fn state(&self) -> PathBuf {
        self.dir.with_extension("state")
    }
}

/// Processes whose command line mentions `path` (a cluster started there).
pub fn processes_mentioning(path: &Path) -> Vec<String> {
    // With the separator, so that `…-1` does not match `…-10`'s processes.
    let needle = format!("{}/", path.to_string_lossy());
    processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(&needle))
        .map(|p| format!("{}: {}", p.pid, p.cmdline.trim()))
        .collect()
}

/// A live process as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub ppid: Option<u32>,
    /// Its arguments, separated by spaces.
    pub cmdline: String,
}

/// Every process running now, zombies left out.
pub fn processes() -> Vec<Process> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let after_name = stat.rsplit_once(") ").map(|(_, rest)| rest);
        if after_name.is_some_and(|rest| rest.starts_with('Z')) {
            continue;
        }
        found.push(Process {
            pid,
            ppid: after_name
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok()),
            cmdline: String::from_utf8_lossy(&cmdline).replace('\0', " "),
        });
    }
    found
}

/// One statement's answer through psql (`-At`: bare values), trimmed.
pub fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(url)
        .args(["-Atc", sql])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Sends a signal to a process.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Whether this test process runs as root (as CI does).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Hands a directory to the `postgres` user (tests that switch to it).
pub fn chown_to_postgres(path: &Path) {
    let status = std::process::Command::new("chown")
        .args(["postgres:"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Reads the child's first line of output, and keeps reading the rest in the
/// background so that idem never sees a closed pipe.
pub fn first_line_then_drain(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    std::thread::spawn(move || lines.for_each(drop));
    first
}

/// Whether a test can run on this machine. When it cannot, it says so where
/// a person running the tests sees it (libtest captures a test's own
/// output, so this writes to the terminal's standard error directly); under
/// CI, where every test must run, it fails instead.
pub fn runnable(test: &str, ok: bool, missing: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test} cannot run here ({missing}), and CI runs every test");
    }
    say(&format!("SKIPPED {test}: {missing}"));
    // The first skip arranges for a count after libtest's own summary,
    // which counts a skipped test as passed.
    if SKIPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        // SAFETY: `say_skipped` is an `extern "C" fn()` that only writes to fd 2.
        unsafe {
            libc::atexit(say_skipped);
        }
    }
    false
}

/// The binary of `examples/<name>.rs`, which `cargo test` builds beside
/// the tests.
pub fn example(name: &str) -> PathBuf {
    let binary = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        binary.exists(),
        "cargo test builds the examples: {}",
        binary.display()
    );
    binary
}

/// A line where a person running the tests sees it while they run: libtest
/// captures a test's own output, so this writes to standard error directly.
pub fn say(line: &str) {
    let line = format!("{line}\n");
    // SAFETY: writes a valid buffer of its own length to fd 2.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

/// Tests that returned early because this machine lacks what they need.
static SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// At exit, after libtest's "test result" line: how many of its passes did
/// not run.
extern "C" fn say_skipped() {
    let n = SKIPPED.load(std::sync::atomic::Ordering::SeqCst);
    let line = format!(
        "{n} skipped: counted as passed above, but they did not run (see the SKIPPED lines)"
    );
    say(&line);
}

/// The child's exit status once it exits, or `None` after `limit`.
pub fn wait_for(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let began = Instant::now();
    while began.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// One lock for the tests whose figures depend on timing (a race window,
/// a rate over many runs): they run one at a time, whatever area they are in.
/// With `IDEM_TIMING_LOG=FILE`, each test appends how long it held it.
pub static TIMING: Timing = Timing(tokio::sync::Mutex::const_new(()));

/// [`TIMING`]: a mutex whose guard can say how long it was held.
pub struct Timing(tokio::sync::Mutex<()>);

/// A hold of [`TIMING`].
pub struct Held {
    _guard: tokio::sync::MutexGuard<'static, ()>,
    since: std::time::Instant,
}

impl Timing {
    pub async fn lock(&'static self) -> Held {
        Held {
            _guard: self.0.lock().await,
            since: std::time::Instant::now(),
        }
    }

    pub fn blocking_lock(&'static self) -> Held {
        Held {
            _guard: self.0.blocking_lock(),
            since: std::time::Instant::now(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(log) = std::env::var_os("IDEM_TIMING_LOG") else {
            return;
        };
        let line = format!(
            "{:.1} {}\n",
            self.since.elapsed().as_secs_f64(),
            std::thread::current().name().unwrap_or("?")
        );
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// A test's race settings, built as the command line builds them.
pub trait Built {
    fn built(self) -> idem::race::RaceSettings;
}

impl Built for idem::race::options::RaceInput {
    fn built(self) -> idem::race::RaceSettings {
        self.build(idem::limits::Origin::Flags)
            .expect("a test's settings are valid")
    }
}

/// Runs `command`, which must succeed (its stderr shown if not), and
/// returns what it printed.
pub fn succeeded(command: &mut assert_cmd::Command) -> std::process::Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a command idem must refuse: exit 1 and one line on stderr, which
/// is returned.
pub fn refused_in_one_line(command: &mut assert_cmd::Command) -> String {
    refused_in_one_line_with(command, 1)
}

/// The same, with exit status `code` (the probe's contract: 2 for a wrong
/// command line, 4 when it could not run).
pub fn refused_in_one_line_with(command: &mut assert_cmd::Command, code: i32) -> String {
    let out = command.assert().code(code).get_output().clone();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// A loopback port free right now (bound, then let go), for a server a
/// test starts or names before it listens.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The probe's `--json` line for its burst (the one with `shots`).
pub fn burst_line(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("shots").is_some())
        .expect("the burst's line")
}
