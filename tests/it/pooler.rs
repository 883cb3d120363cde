//! A real PgBouncer 1.18 in transaction mode (Debian's package) in front of a test server: idem through a user's pooler, and what pooling breaks.
//!
//! Through transaction pooling a session's search_path, its prepared
//! statements and its session locks move between clients. idem's run
//! schema, its statements and its liveness lock rest on none of the three,
//! and these tests hold it to that through a real PgBouncer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::server::Server;
use crate::common::{Sandbox, chown_to_postgres, is_root, refused_in_one_line, runnable};

/// Where Debian's package puts PgBouncer.
const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// A PgBouncer in transaction mode, its defaults otherwise, on a unix
/// socket in its own directory; stopped when dropped.
struct Bouncer {
    dir: PathBuf,
    pid: u32,
}

const PORT: u16 = 6432;

impl Bouncer {
    fn start(server: &Server, dir: &Path) -> Self {
        Self::start_with(server, dir, "")
    }

    /// With more `[pgbouncer]` settings, one `name = value` per line.
    fn start_with(server: &Server, dir: &Path, more: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\npostgres = host={} dbname=postgres user=postgres\n\
                 [pgbouncer]\nlisten_addr =\nunix_socket_dir = {dir}\nlisten_port = {PORT}\n\
                 auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = transaction\n\
                 logfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n{more}",
                server.socket().display(),
                dir = dir.display()
            ),
        )
        .unwrap();
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        // PgBouncer refuses to run as root, as PostgreSQL does.
        let mut command = if is_root() {
            for path in [dir.to_path_buf(), ini.clone(), dir.join("users.txt")] {
                chown_to_postgres(&path);
            }
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", PGBOUNCER]);
            c
        } else {
            Command::new(PGBOUNCER)
        };
        let status = command.arg("-d").arg(&ini).status().unwrap();
        assert!(status.success(), "pgbouncer started");
        let pidfile = dir.join("pgbouncer.pid");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dir.join(format!(".s.PGSQL.{PORT}")).exists() || !pidfile.exists() {
            assert!(Instant::now() < deadline, "pgbouncer listens");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The pidfile may exist a moment before its number is written.
        let pid = loop {
            let read = std::fs::read_to_string(&pidfile).unwrap_or_default();
            if let Ok(pid) = read.trim().parse() {
                break pid;
            }
            assert!(Instant::now() < deadline, "pgbouncer writes its pid");
            std::thread::sleep(Duration::from_millis(10));
        };
        Self {
            dir: dir.to_path_buf(),
            pid,
        }
    }

    fn url(&self) -> String {
        format!(
            "postgresql:///postgres?host={}&port={PORT}&user=postgres",
            self.dir.display()
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        crate::common::signal(self.pid, libc::SIGTERM);
    }
}

/// A user's server (`server`, with their objects or empty) behind a
/// PgBouncer of theirs, in a sandbox named `test`; `None` (a loud skip)
/// where PgBouncer is not installed.
fn behind_a_users_pgbouncer(
    test: &str,
    server: fn() -> Server,
) -> Option<(Sandbox, Server, Bouncer)> {
    if !installed(test) {
        return None;
    }
    let sandbox = Sandbox::new(test);
    let server = server();
    let bouncer = Bouncer::start(&server, &sandbox.dir.join("bouncer"));
    Some((sandbox, server, bouncer))
}

/// Every worker met no database error but the one the lesson shows:
/// check-then-store's losers of the key store (23505). Nothing that a
/// pooler causes (a missing relation or prepared statement).
fn assert_no_pooler_errors(run: &Value) {
    for worker in run["reports"].as_array().unwrap() {
        let lesson = run["strategy"] == "check-then-store" && worker["error"]["code"] == "23505";
        assert!(worker["error"].is_null() || lesson, "{worker}");
    }
}

fn installed(test: &str) -> bool {
    runnable(
        test,
        Path::new(PGBOUNCER).exists(),
        "pgbouncer is not installed (apt-get install pgbouncer)",
    )
}

/// The issue's report: through PgBouncer idem failed on sqlx's
/// `extra_float_digits`, then on the run's search_path. Now a user's URL
/// that points at a PgBouncer in transaction mode runs every strategy of
/// the course with the course's figures, bookkeeping and all, and leaves
/// the server as it found it.
#[test]
fn a_users_pgbouncer_in_transaction_mode_runs_the_course_and_leaves_the_server_as_it_was() {
    let Some((sandbox, server, bouncer)) =
        behind_a_users_pgbouncer("pooler-course", Server::with_user_objects)
    else {
        return;
    };
    let before = server.user_state();
    let out = sandbox
        .idem()
        .args([
            "compare",
            "--runs",
            "3",
            "--json",
            "--database-url",
            &bouncer.url(),
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim().is_empty(), "{stderr}");
    let runs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let figure = |strategy: &str| -> Vec<(u64, u64)> {
        runs.iter()
            .filter(|r| r["strategy"] == strategy)
            .map(|r| {
                (
                    r["key_rows"].as_u64().unwrap(),
                    r["xp_rows"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    // The app's pool of five, one held by the runner: the course's figures.
    assert_eq!(figure("check-then-store"), vec![(1, 4); 3]);
    assert_eq!(figure("claim-work-complete"), vec![(1, 1); 3]);
    assert_eq!(figure("insert-unique"), vec![(0, 1); 3]);
    assert_eq!(figure("guard"), vec![(1, 1); 3]);
    assert_eq!(figure("none"), vec![(0, 5); 3]);
    for run in &runs {
        assert_no_pooler_errors(run);
    }
    // What went through was idem's, as PgBouncer logged it.
    assert!(!bouncer.log().contains("unsupported startup parameter"));
    assert_eq!(server.user_state(), before);
    assert!(server.idem_schemas().is_empty());
}

/// Through a PgBouncer in transaction mode the run's liveness lock is held
/// in a transaction kept open, which PgBouncer keeps on one server
/// connection: after a heartbeat the lock is still held there, the
/// heartbeat is fresh, and another run's sweep leaves the schema alone.
#[test]
fn through_a_users_pgbouncer_a_live_runs_lock_and_heartbeat_hold() {
    let Some((sandbox, server, bouncer)) =
        behind_a_users_pgbouncer("pooler-liveness", Server::start)
    else {
        return;
    };
    let mut child = sandbox
        .idem_std()
        .args(["race", "--runs", "1000000", "--work-ms", "1", "--json"])
        .args(["--database-url", &bouncer.url()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let schema = server.wait_for_run_schema(&[], Duration::from_secs(10));
    // One heartbeat (every 5 s) and a little more.
    let deadline = Instant::now() + Duration::from_secs(15);
    let beaten =
        format!("SELECT heartbeat_at > created_at + interval '4 s' FROM {schema}.idem_run");
    while server.psql(&beaten) != "t" {
        assert!(Instant::now() < deadline, "no heartbeat through PgBouncer");
        std::thread::sleep(Duration::from_millis(100));
    }
    let held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted";
    assert_eq!(server.psql(held), "1");
    // Another run straight to the server sweeps, and leaves it.
    sandbox
        .idem()
        .args(["doctor", "--database-url", &server.url()])
        .assert()
        .success();
    assert!(server.idem_schemas().contains(&schema));
    crate::common::signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(server.idem_schemas().is_empty());
    assert_eq!(server.psql(held), "0");
}

/// `idem doctor` names a PgBouncer behind the URL (its console, and two
/// connections served by one server process), and names none behind
/// PostgreSQL's own; what needs a worker's own server process is refused
/// through it in one line.
#[test]
fn doctor_names_a_users_pgbouncer_and_what_needs_a_session_is_refused_through_it() {
    let Some((sandbox, server, bouncer)) = behind_a_users_pgbouncer("pooler-doctor", Server::start)
    else {
        return;
    };
    let doctor = |url: &str| -> Value {
        let out = sandbox
            .idem()
            .args(["doctor", "--json", "--database-url", url])
            .assert()
            .success()
            .get_output()
            .clone();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["pooler"].clone()
    };
    let through = doctor(&bouncer.url());
    // The test's PgBouncer has no admin_users: its console refuses idem's user.
    assert_eq!(through["console_refused"], true, "{through}");
    assert!(through["shared_process"].is_i64(), "{through}");
    // One whose console lets idem's user in says its version and mode.
    let admitted = Bouncer::start_with(
        &server,
        &sandbox.dir.join("admin"),
        "admin_users = postgres\n",
    );
    let told = doctor(&admitted.url());
    assert!(
        told["pgbouncer"]
            .as_str()
            .is_some_and(|v| v.starts_with("PgBouncer 1.")),
        "{told}"
    );
    assert_eq!(told["pool_mode"], "transaction", "{told}");
    let direct = doctor(&server.url());
    assert_eq!(direct["console_refused"], false, "{direct}");
    assert!(
        direct["pgbouncer"].is_null() && direct["shared_process"].is_null(),
        "{direct}"
    );
    let stderr = refused_in_one_line(
        sandbox
            .idem()
            .args(["race", "-s", "guard", "--crash", "at=after-claim"])
            .args(["--database-url", &bouncer.url()]),
    );
    assert!(
        stderr.contains("a pooler stands between idem and PostgreSQL"),
        "{stderr}"
    );
    assert!(server.idem_schemas().is_empty());
}

/// The trust test's every command, through a user's PgBouncer in front of
/// their objects: each runs, or (what finds a worker by its server process,
/// and the benchmark, which measures PostgreSQL itself) is refused in one
/// line; either way their objects are as they were and no schema is left.
#[test]
fn every_command_through_a_users_pgbouncer_leaves_their_objects_as_they_were() {
    let Some((sandbox, server, bouncer)) =
        behind_a_users_pgbouncer("pooler-every-command", Server::with_user_objects)
    else {
        return;
    };
    let before = server.user_state();
    for args in crate::common::server::EVERY_COMMAND {
        let refused = match args[0] {
            // Stepped races (lesson 4's are) and the challenge's crashes.
            "step" | "scenario" | "lesson" | "challenge" => {
                Some("a pooler stands between idem and PostgreSQL")
            }
            "bench" => Some("idem bench measures PostgreSQL itself"),
            _ => None,
        };
        let mut idem = sandbox.idem();
        idem.args(args).args(["--database-url", &bouncer.url()]);
        match refused {
            Some(said) => {
                let stderr = refused_in_one_line(&mut idem);
                assert!(stderr.contains(said), "{args:?}: {stderr}");
            }
            None => {
                idem.assert().success();
            }
        }
        assert!(server.idem_schemas().is_empty(), "{args:?} dropped its own");
    }
    // serve on it, awards counted through it.
    let probed = crate::common::server::serve_probed(&sandbox, &bouncer.url());
    assert!(
        probed.contains("duplicate: 5 effects for one key"),
        "{probed}"
    );
    assert!(server.idem_schemas().is_empty());
    assert_eq!(server.user_state(), before);
}

/// Lesson 8's matrix through PgBouncer: a request's transaction, its level
/// and its `pg_advisory_xact_lock` live in one transaction, which PgBouncer
/// keeps on one server process, so every row holds as it does directly.
#[test]
fn the_matrix_through_pgbouncer_holds_as_it_does_directly() {
    if !installed("the_matrix_through_pgbouncer_holds_as_it_does_directly") {
        return;
    }
    let out = Sandbox::new("pooler-matrix")
        .idem()
        .args(["matrix", "--via", "pgbouncer", "--runs", "3", "--json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let matrix: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(matrix["via"], "pgbouncer");
    let rows = matrix["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 21);
    for row in rows {
        let (strategy, transaction) = (&row["strategy"], &row["transaction"]);
        let rows_held = !(strategy == "check-then-store" && transaction == "none");
        assert_eq!(
            row["rows_held_rate"],
            if rows_held { 1.0 } else { 0.0 },
            "{row}"
        );
        let once = match strategy.as_str().unwrap() {
            "claim-work-complete" | "guard" => true,
            "advisory-lock" => row["isolation"] == "read-committed",
            _ => false,
        };
        assert_eq!(row["work_held_rate"], if once { 1.0 } else { 0.0 }, "{row}");
    }
}

/// `idem pooler --json`'s finding called `name`.
fn finding(sandbox: &Sandbox, name: &str) -> Value {
    let out = sandbox
        .idem()
        .args(["pooler", "--json", "--runs", "3"])
        .assert()
        .success()
        .get_output()
        .clone();
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        found["pgbouncer"]
            .as_str()
            .unwrap()
            .starts_with("PgBouncer 1."),
        "{found}"
    );
    found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no finding {name}: {found}"))
}

/// A session setting made by one client is what the next client of the
/// same server connection finds.
#[test]
fn through_pgbouncer_a_session_setting_leaks_to_another_client() {
    if !installed("through_pgbouncer_a_session_setting_leaks_to_another_client") {
        return;
    }
    let sandbox = Sandbox::new("pooler-setting");
    let f = finding(&sandbox, "setting");
    assert_eq!(f["direct"], "B sees lock_timeout = 0");
    assert_eq!(f["pooled"], "B sees lock_timeout = 1234ms");
    assert_eq!(
        (f["broken_runs"].as_u64(), f["runs"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(sandbox.leftovers().is_empty());
}

/// A session advisory lock held by one client is taken by another.
#[test]
fn through_pgbouncer_a_session_advisory_lock_excludes_no_one() {
    if !installed("through_pgbouncer_a_session_advisory_lock_excludes_no_one") {
        return;
    }
    let sandbox = Sandbox::new("pooler-lock");
    let f = finding(&sandbox, "advisory_lock");
    assert_eq!(f["direct"], "B was refused the lock A holds");
    assert_eq!(f["pooled"], "B got the lock A holds");
    assert_eq!(f["broken_runs"], 3);
}

/// A prepared statement is gone once its client lands on another server
/// connection: PgBouncer 1.18 does not follow protocol-level statements.
#[test]
fn through_pgbouncer_a_prepared_statement_does_not_exist_on_the_next_connection() {
    if !installed("through_pgbouncer_a_prepared_statement_does_not_exist") {
        return;
    }
    let sandbox = Sandbox::new("pooler-prepared");
    let f = finding(&sandbox, "prepared_statement");
    assert_eq!(f["direct"], "A ran its statement");
    let pooled = f["pooled"].as_str().unwrap();
    assert!(
        pooled.starts_with("A was told: prepared statement \"s")
            && pooled.ends_with("does not exist"),
        "{pooled}"
    );
    assert_eq!(f["broken_runs"], 3);
}

/// kill -9 mid-way, of `idem pooler` and of a race through PgBouncer:
/// the PgBouncer dies with idem, the cluster too, and no directory stays.
#[test]
fn a_killed_run_through_pgbouncer_leaves_no_pgbouncer_server_or_directory() {
    if !installed("a_killed_run_through_pgbouncer_leaves_no_pgbouncer_server_or_directory") {
        return;
    }
    let sandbox = Sandbox::new("pooler-kill");
    for args in [
        &["pooler", "--runs", "10000"][..],
        &["race", "--via", "pgbouncer", "--runs", "100000"],
    ] {
        let mut run = sandbox
            .idem_std()
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Its PgBouncer lives in its cluster's run directory, named after it.
        let ours = format!("idem-{}-", run.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !pgbouncers().iter().any(|p| p.contains(&ours)) {
            assert!(Instant::now() < deadline, "{args:?}: a PgBouncer started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        crate::common::signal(run.id(), libc::SIGKILL);
        let _ = run.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        let left = || {
            crate::common::processes()
                .into_iter()
                .filter(|p| p.cmdline.contains(&ours))
                .map(|p| p.cmdline)
                .collect::<Vec<_>>()
        };
        while !left().is_empty() {
            assert!(
                Instant::now() < deadline,
                "{args:?}: PgBouncer and the server died with idem: {:?}",
                left()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
    }
}

/// The course's strategies through the PgBouncer idem starts: the figures
/// of a direct race, every worker answered without a database error, and
/// the results say which way they went.
#[test]
fn the_course_through_pgbouncer_gives_the_course_figures() {
    if !installed("the_course_through_pgbouncer_gives_the_course_figures") {
        return;
    }
    let out = Sandbox::new("pooler-via")
        .idem()
        .args(["compare", "--via", "pgbouncer", "--runs", "5", "--json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let runs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 25);
    for run in &runs {
        assert_eq!(run["via"], "pgbouncer");
        let figure = (run["key_rows"].as_u64(), run["xp_rows"].as_u64());
        let expected = match run["strategy"].as_str().unwrap() {
            "none" => (0, 5),
            "check-then-store" => (1, 4),
            "insert-unique" => (0, 1),
            _ => (1, 1),
        };
        assert_eq!(figure, (Some(expected.0), Some(expected.1)), "{run}");
        assert_no_pooler_errors(run);
    }
}

/// Over replicas through PgBouncer, each app process is a client of it,
/// bookkeeping and all: the per-process arithmetic of a direct race.
#[test]
fn replicas_through_pgbouncer_make_one_row_per_connection_per_process() {
    if !installed("replicas_through_pgbouncer_make_one_row_per_connection_per_process") {
        return;
    }
    let out = Sandbox::new("pooler-replicas")
        .idem()
        .args(["race", "--via", "pgbouncer", "--http", "--replicas", "2"])
        .args([
            "--workers",
            "10",
            "--runner-connection",
            "--runs",
            "3",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let run: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (run["xp_rows"].as_u64(), run["replicas"].as_u64()),
            (Some(8), Some(2)),
            "{run}"
        );
    }
}

/// `serve --via pgbouncer`: the app's pool is PgBouncer's client. Forty
/// pooled connections, and the server sees no more than PgBouncer's own
/// pool of twenty (a direct pool of forty is forty server processes).
#[test]
fn serve_through_pgbouncer_puts_the_apps_pool_behind_it() {
    if !installed("serve_through_pgbouncer_puts_the_apps_pool_behind_it") {
        return;
    }
    let sandbox = Sandbox::new("pooler-serve");
    let server_side = |via: &str| -> (i64, String) {
        let mut serve = sandbox
            .idem_std()
            .args(["serve", "--via", via, "--pool-size", "40"])
            .args(["--listen", "127.0.0.1:0", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(sandbox.dir.join("serve.err")).unwrap())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let said = std::fs::read_to_string(sandbox.dir.join("serve.err")).unwrap_or_default();
        let ready: Value = serde_json::from_str(&ready)
            .unwrap_or_else(|_| panic!("serve --via {via} is ready: {said}"));
        let url = ready["database_url"].as_str().unwrap().to_string();
        let psql = idem::db::binaries::PgBinaries::locate(None)
            .unwrap()
            .dir
            .join("psql");
        let backends = Command::new(psql)
            .args([
                "-XAtc",
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
            ])
            .arg(&url)
            .output()
            .unwrap();
        let backends = String::from_utf8_lossy(&backends.stdout)
            .trim()
            .parse()
            .unwrap();
        let answered = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
            .arg(ready["endpoint"].as_str().unwrap())
            .args([
                "-H",
                "Idempotency-Key: \"k1\"",
                "-H",
                "content-type: application/json",
            ])
            .args(["-d", r#"{"user_id": 42, "amount": 10}"#])
            .output()
            .unwrap();
        crate::common::signal(serve.id(), libc::SIGTERM);
        let _ = serve.wait();
        (
            backends,
            String::from_utf8_lossy(&answered.stdout).into_owned(),
        )
    };
    let (direct, answered) = server_side("direct");
    assert_eq!(answered, "201");
    assert!(
        direct >= 40,
        "{direct} server processes for a direct pool of 40"
    );
    let (through, answered) = server_side("pgbouncer");
    assert_eq!(answered, "201");
    assert!(through < 40, "{through} server processes through PgBouncer");
    let _ = std::fs::remove_file(sandbox.dir.join("serve.err"));
    assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
}

/// What finds a worker by its server process is refused through
/// PgBouncer, and so is a PgBouncer idem cannot start: one line each.
#[test]
fn what_needs_a_session_is_refused_through_pgbouncer_in_one_line() {
    let sandbox = Sandbox::new("pooler-refused");
    let server = Server::start();
    let url = server.url();
    for (args, said) in [
        (
            &[
                "race",
                "--via",
                "pgbouncer",
                "-s",
                "guard",
                "--crash",
                "at=after-claim",
            ][..],
            "pg_backend_pid",
        ),
        (
            &[
                "race",
                "--via",
                "pgbouncer",
                "--kill-connection",
                "-s",
                "guard",
            ],
            "pg_backend_pid",
        ),
        (
            &["step", "--via", "pgbouncer", "--schedule", "1,2"],
            "stepped",
        ),
        (
            &["race", "--via", "pgbouncer", "--database-url", &url],
            "--database-url",
        ),
    ] {
        // idem step's exit 1 is a verdict: a command line it cannot run is 2.
        let code = if args[0] == "step" { 2 } else { 1 };
        let stderr = crate::common::refused_in_one_line_with(sandbox.idem().args(args), code);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
    assert!(server.idem_schemas().is_empty());
}

/// The command lines of the PgBouncer processes running now.
fn pgbouncers() -> Vec<String> {
    crate::common::processes()
        .into_iter()
        .map(|p| p.cmdline)
        .filter(|c| c.contains("pgbouncer") && c.contains(".ini"))
        .collect()
}

/// The issue's report: a count taking `pg_try_advisory_lock` through
/// PgBouncer left the lock on a server connection after its rollback. The
/// count is refused, and the lock is let go inside its transaction.
#[test]
fn a_count_that_locks_through_pgbouncer_is_refused_and_leaves_no_lock() {
    let Some((sandbox, server, bouncer)) =
        behind_a_users_pgbouncer("pgb-count-lock", Server::start)
    else {
        return;
    };
    let locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'";
    for _ in 0..3 {
        let out = sandbox
            .idem()
            .args(["probe", "http://127.0.0.1:9/nothing-listens", "-d", "{}"])
            .args([
                "--count-sql",
                "SELECT count(*) FROM (SELECT pg_try_advisory_lock(4242)) s",
                "--count-database-url",
                &bouncer.url(),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Refused once the requests had gone: not judged, the contract's 3.
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("took 1 advisory lock (released)"),
            "{stderr}"
        );
        assert_eq!(
            server.psql(locks),
            "0",
            "no advisory lock stays on the server"
        );
    }
}
