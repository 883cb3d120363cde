//! However idem is stopped (SIGKILL at any moment, Ctrl-C while a child hangs), no server keeps running
//! and no directory stays for good.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::common::{Sandbox, processes_mentioning, signal};

/// A template cache of the test's own, outside the sandbox whose contents are checked.
struct Cache(PathBuf);

impl Cache {
    fn new(name: &str) -> Self {
        let dir = crate::common::scratch_parent()
            .join(format!("idem-test-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits until no process mentions the sandbox; returns those still there.
fn wait_for_no_processes(dir: &Path, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_mentioning(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pids of supervisors started for clusters in `dir`.
fn supervisors_in(dir: &Path) -> Vec<String> {
    processes_mentioning(dir)
        .into_iter()
        .filter(|p| p.contains("idem-supervisor"))
        .collect()
}

/// Starts `idem race` on `cache`, kills it with SIGKILL at moment `i` of
/// the loop (the first 30 spread over `whole`, the rest at the
/// supervisor's start), and waits for its processes to go; says what was
/// left running, if anything (and kills it).
fn kill_once(
    sandbox: &Sandbox,
    cache: &std::path::Path,
    i: u32,
    whole: Duration,
) -> Option<String> {
    let mut child = sandbox
        .idem_std()
        .env("IDEM_CACHE_DIR", cache)
        .args(["race", "--work-ms", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moment = if i < 30 {
        let at = whole * i / 30;
        std::thread::sleep(at);
        format!("{} ms", at.as_millis())
    } else {
        let deadline = Instant::now() + Duration::from_secs(10);
        while supervisors_in(&sandbox.dir).is_empty() && Instant::now() < deadline {}
        "the supervisor's start".to_string()
    };
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();
    let left = wait_for_no_processes(&sandbox.dir, Duration::from_secs(10));
    let mut leak = None;
    if !left.is_empty() {
        leak = Some(format!("kill {i} at {moment}: {left:?}"));
        for process in left {
            let pid: i32 = process.split(':').next().unwrap().parse().unwrap();
            signal(pid as u32, libc::SIGKILL);
        }
    }
    leak
}

#[test]
fn sigkill_at_spread_moments_of_start_up_leaves_no_server_and_no_directory() {
    let sandbox = Sandbox::new("kill-loop");
    let test_began = std::time::SystemTime::now();
    let warm = Cache::new("kill-loop-warm");
    // Make the warm template once, and time a whole start-up and stop.
    sandbox
        .idem()
        .env("IDEM_CACHE_DIR", &warm.0)
        .arg("doctor")
        .assert()
        .success();
    let began = Instant::now();
    sandbox
        .idem()
        .env("IDEM_CACHE_DIR", &warm.0)
        .arg("doctor")
        .assert()
        .success();
    let whole = began.elapsed();

    crate::common::say(
        "kills: 45 runs of idem killed with SIGKILL at moments of their start-up, \
         each followed by a check for leftovers (a minute or two)",
    );
    let mut cold = Vec::new();
    let mut leaks = Vec::new();
    // 30 kills spread evenly over a whole run, then 15 aimed at the
    // supervisor's first moments, where a stop signal is easiest to lose.
    for i in 0..45u32 {
        // Every fifth spread kill lands in a cold start: initdb, then the template copy.
        let cache = if i < 30 && i % 5 == 0 {
            cold.push(Cache::new(&format!("kill-loop-cold-{i}")));
            cold.last().unwrap().0.clone()
        } else {
            warm.0.clone()
        };
        leaks.extend(kill_once(&sandbox, &cache, i, whole));
    }
    assert_eq!(leaks, Vec::<String>::new(), "processes left running");
    // The next run, on each cache, removes whatever directories the kills left.
    for cache in cold.iter().map(|c| &c.0).chain([&warm.0]) {
        sandbox
            .idem()
            .env("IDEM_CACHE_DIR", cache)
            .arg("doctor")
            .assert()
            .success();
        if let Ok(entries) = std::fs::read_dir(cache) {
            let stray: Vec<_> = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(".incoming"))
                .map(|e| e.path())
                .collect();
            assert_eq!(stray, Vec::<PathBuf>::new(), "half-made templates");
        }
    }
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
    // A kill in initdb's first moments can leave the shared memory of one
    // of its short-lived backends (PostgreSQL's default, POSIX segments;
    // idem's servers keep theirs in their data directories). These kills
    // are on purpose, so the test removes what nobody maps any more.
    let removed = crate::common::segments::remove_orphans_since(test_began);
    if !removed.is_empty() {
        eprintln!(
            "removed {} shared-memory segment(s) the killed initdb runs left: {removed:?}",
            removed.len()
        );
    }
}

#[test]
fn a_killed_bench_leaves_nothing_after_the_next_run() {
    let sandbox = Sandbox::new("kill-bench");
    let mut child = sandbox
        .idem_std()
        .args(["bench", "--quick", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let scratch = loop {
        let found = std::fs::read_dir(&sandbox.dir)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("idem-bench-"));
        if let Some(entry) = found {
            break entry.path();
        }
        assert!(
            Instant::now() < deadline,
            "the bench made no scratch directory"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();
    assert_eq!(
        wait_for_no_processes(&sandbox.dir, Duration::from_secs(10)),
        Vec::<String>::new()
    );
    assert!(
        scratch.exists(),
        "a kill leaves the scratch directory to the next run"
    );
    sandbox.idem().arg("doctor").assert().success();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn with_no_home_the_cache_is_this_users_own_and_private() {
    let sandbox = Sandbox::new("no-home");
    let idem = || {
        let mut cmd = sandbox.idem();
        cmd.env_remove("HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("IDEM_CACHE_DIR");
        cmd
    };
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let cache = sandbox.dir.join(format!("idem-cache-{uid}"));
    // A directory of that name that others may write to is refused.
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    idem()
        .arg("doctor")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a private directory"));
    std::fs::remove_dir(&cache).unwrap();

    idem().arg("doctor").assert().success();
    let meta = std::fs::metadata(&cache).unwrap();
    assert_eq!(meta.uid(), uid);
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
}

/// A `--pg-bin` of fake programs: `postgres --version` says `version` (or
/// hangs), `initdb` runs `initdb_body`.
fn fake_bin(sandbox: &Sandbox, version: Option<&str>, initdb_body: &str) -> PathBuf {
    let dir = sandbox.dir.join("fake-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let postgres = match version {
        Some(v) => format!("#!/bin/sh\necho 'postgres (PostgreSQL) {v}'\n"),
        None => "#!/bin/sh\nexec sleep 1002\n".to_string(),
    };
    for (name, body) in [
        ("postgres", postgres),
        ("initdb", format!("#!/bin/sh\n{initdb_body}\n")),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn processes_running(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.trim() == needle {
                found.push(cmdline);
            }
        }
    }
    found
}

/// Starts idem on fake binaries that hang in `sleep <marker>`, sends `sig`
/// once the hang has begun, and returns the exit code and how long it took.
fn stop_while_a_child_hangs(
    name: &str,
    version: Option<&str>,
    marker: &str,
    sig: i32,
) -> (Option<i32>, Duration) {
    let sandbox = Sandbox::new(name);
    let cache = Cache::new(name);
    let bin = fake_bin(&sandbox, version, &format!("exec sleep {marker}"));
    let mut child = sandbox
        .idem_std()
        .env("IDEM_CACHE_DIR", &cache.0)
        .args(["race", "--pg-bin"])
        .arg(&bin)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let needle = format!("sleep {marker}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_running(&needle).is_empty() {
        assert!(Instant::now() < deadline, "the fake child never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let began = Instant::now();
    signal(child.id(), sig);
    let status = child.wait().unwrap();
    let took = began.elapsed();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !processes_running(&needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the hanging child was left running"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let left: Vec<String> = sandbox
        .leftovers()
        .into_iter()
        .filter(|l| !l.contains("fake-bin"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    (status.code(), took)
}

#[test]
fn ctrl_c_while_initdb_hangs_stops_it_within_a_second() {
    let (code, took) =
        stop_while_a_child_hangs("hang-initdb-int", Some("15.99"), "1001", libc::SIGINT);
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn sigterm_while_initdb_hangs_stops_it_within_a_second() {
    let (code, took) =
        stop_while_a_child_hangs("hang-initdb-term", Some("15.99"), "1003", libc::SIGTERM);
    assert_eq!(code, Some(143));
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn ctrl_c_while_postgres_version_hangs_stops_it_within_a_second() {
    let (code, took) = stop_while_a_child_hangs("hang-version", None, "1002", libc::SIGINT);
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn fake_or_old_binaries_are_named_in_one_line() {
    let sandbox = Sandbox::new("fake-bins");
    let cache = Cache::new("fake-bins");
    let cases = [
        (
            Some("15.99"),
            "exit 0",
            "reported success but made no data directory in",
        ),
        (
            Some("8.4.22"),
            "exit 0",
            "is PostgreSQL 8.4.22; idem needs 14 or newer",
        ),
        (
            Some("15.99"),
            "echo 'initdb: error: disk on fire' >&2; exit 1",
            "initdb failed: initdb: error: disk on fire",
        ),
    ];
    for (version, initdb, expected) in cases {
        let bin = fake_bin(&sandbox, version, initdb);
        let out = sandbox
            .idem()
            .env("IDEM_CACHE_DIR", &cache.0)
            .args(["race", "--pg-bin"])
            .arg(&bin)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(expected));
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        std::fs::remove_dir_all(&bin).unwrap();
        assert_eq!(sandbox.leftovers(), Vec::<String>::new());
    }
}

/// Starts `idem db -- sh -c SCRIPT` and waits (at most 30 s) until a
/// process whose command line holds `marker` runs.
fn db_running(sandbox: &Sandbox, script: &str, marker: &str) -> std::process::Child {
    let child = sandbox
        .idem_std()
        .args(["db", "--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeping(marker).len() < 2 {
        assert!(Instant::now() < deadline, "the command and its child start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The `sleep` processes whose argument begins with `marker`.
fn sleeping(marker: &str) -> Vec<String> {
    crate::common::processes()
        .into_iter()
        .map(|p| p.cmdline)
        .filter(|c| c.starts_with("sleep ") && c.contains(marker))
        .collect()
}

/// Waits at most `limit` for no `sleep` of `marker`'s.
fn none_running(marker: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = sleeping(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The report: after `kill -9` of `idem db -- CMD`, CMD ran on (8 of
/// 8) with its database gone. Its whole process group goes with idem.
#[test]
fn a_killed_idem_db_takes_its_command_and_the_commands_children_with_it() {
    let sandbox = Sandbox::new("db-killed");
    let marker = format!("600.{}", std::process::id());
    let script = format!("sleep {marker} & sleep {marker}1; wait");
    for _ in 0..3 {
        let mut idem = db_running(&sandbox, &script, &marker);
        signal(idem.id(), libc::SIGKILL);
        let _ = idem.wait();
        assert_eq!(
            none_running(&marker, Duration::from_secs(5)),
            Vec::<String>::new()
        );
        assert_eq!(
            wait_for_no_processes(&sandbox.dir, Duration::from_secs(10)),
            Vec::<String>::new()
        );
    }
}

/// A command that ignores SIGTERM is killed with its children after the
/// grace period, and idem says so, then ends as it was asked to: calmly.
#[test]
fn a_command_that_ignores_sigterm_is_killed_whole_after_the_grace_period() {
    let sandbox = Sandbox::new("db-stubborn");
    let marker = format!("700.{}", std::process::id());
    let script = format!("trap '' TERM; sleep {marker} & sleep {marker}1; wait");
    let idem = db_running(&sandbox, &script, &marker);
    signal(idem.id(), libc::SIGTERM);
    let out = idem.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("did not stop within 5 s"), "{stderr}");
    assert!(
        stderr.contains("SIGTERM; sh stopped, removing the cluster"),
        "{stderr}"
    );
    assert_eq!(
        none_running(&marker, Duration::from_secs(2)),
        Vec::<String>::new()
    );
    assert_eq!(
        wait_for_no_processes(&sandbox.dir, Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// `eval "$(idem db)"` in a pipe: the lines are for a shell, never wrapped.
#[test]
fn idem_db_exports_are_never_wrapped_for_a_shell() {
    let sandbox = Sandbox::new("db-exports");
    let mut idem = sandbox
        .idem_std()
        .args(["db"])
        .env("COLUMNS", "20")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let stdout = idem.stdout.take().unwrap();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.unwrap();
        lines.push(line);
        if lines.len() == 4 {
            break;
        }
    }
    signal(idem.id(), libc::SIGINT);
    assert_eq!(idem.wait().unwrap().code(), Some(0));
    let script = format!("{}\npsql -Atc 'SELECT 1'", lines.join("\n"));
    let psql = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        lines[0].starts_with("export DATABASE_URL='postgresql:///"),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| l.starts_with("export ")), "{lines:?}");
    // The cluster is gone by now, so psql fails to connect, but on the socket it was told.
    let said = String::from_utf8_lossy(&psql.stderr);
    assert!(said.contains("/.s.PGSQL."), "{said}");
    assert_eq!(
        wait_for_no_processes(&sandbox.dir, Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// `kill -9` of a probe while its `--count-cmd` hangs: the command and
/// what it started are gone within the count's timeout, as `idem db`'s
/// command is (a lifeline: nothing the kernel lets idem do when killed).
#[test]
fn a_killed_probe_leaves_no_count_command() {
    let sandbox = Sandbox::new("count-cmd-kill");
    // A marker only this test's processes carry.
    let marker = format!("{}.{}", 900 + std::process::id() % 97, std::process::id());
    let running = || -> Vec<String> {
        crate::common::processes()
            .into_iter()
            .filter(|p| p.cmdline.starts_with("sleep ") && p.cmdline.contains(&marker))
            .map(|p| format!("{}: {}", p.pid, p.cmdline))
            .collect()
    };
    let mut probe = sandbox
        .idem_std()
        .args(["probe", "http://127.0.0.1:1/pay", "-d", "{}"])
        .args([
            "--count-cmd",
            &format!("sleep {marker} & sleep {marker}; echo 1"),
        ])
        .args(["--count-timeout-ms", "30000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Its two sleeps, one in the background.
    while running().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the count never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::signal(probe.id(), libc::SIGKILL);
    probe.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "left running: {:?}",
            running()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
