//! A real PgBouncer 1.18 in transaction mode (Debian's package) in front of a test server: what idem does when a user's URL points at one.
//!
//! Through transaction pooling a session's search_path, its prepared
//! statements and its session locks move between clients, and idem's run
//! schema, its workers' statements and its liveness lock rest on all three.
//! Until idem runs through a pooler, it must refuse one plainly, before it
//! creates anything, and leave the server as it found it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::server::Server;
use crate::common::{Sandbox, chown_to_postgres, is_root, runnable};

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
        std::fs::create_dir_all(dir).unwrap();
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\npostgres = host={} dbname=postgres user=postgres\n\
                 [pgbouncer]\nlisten_addr =\nunix_socket_dir = {dir}\nlisten_port = {PORT}\n\
                 auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = transaction\n\
                 logfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n",
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
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
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

fn installed(test: &str) -> bool {
    runnable(
        test,
        Path::new(PGBOUNCER).exists(),
        "pgbouncer is not installed (apt-get install pgbouncer)",
    )
}

/// The report: through PgBouncer idem failed on sqlx's
/// `extra_float_digits`. It no longer sends it; what PgBouncer refuses now
/// is the run's search_path, and idem says what that means in one line,
/// before it has made anything.
#[test]
fn a_url_through_pgbouncer_in_transaction_mode_is_refused_in_one_line_leaving_the_server_as_it_was()
{
    if !installed("a_url_through_pgbouncer_in_transaction_mode_is_refused") {
        return;
    }
    let sandbox = Sandbox::new("pooler");
    let server = Server::with_user_objects();
    let before = server.user_state();
    let bouncer = Bouncer::start(&server, &sandbox.dir.join("bouncer"));
    let out = sandbox
        .idem()
        .args(["race", "--database-url", &bouncer.url()])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("PgBouncer"), "{stderr}");
    assert!(!stderr.contains("extra_float_digits"), "{stderr}");
    // PgBouncer saw idem's connection and refused the schema's parameter.
    assert!(
        bouncer
            .log()
            .contains("unsupported startup parameter: options"),
        "{}",
        bouncer.log()
    );
    assert_eq!(server.user_state(), before);
    assert!(server.idem_schemas().is_empty());
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

/// kill -9 mid-way: the PgBouncer dies with idem, the cluster too, and no
/// directory stays.
#[test]
fn a_killed_pooler_run_leaves_no_pgbouncer_server_or_directory() {
    if !installed("a_killed_pooler_run_leaves_no_pgbouncer_server_or_directory") {
        return;
    }
    let sandbox = Sandbox::new("pooler-kill");
    let mut run = sandbox
        .idem_std()
        .args(["pooler", "--runs", "10000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Its PgBouncers live in its cluster's run directory, named after it.
    let ours = format!("idem-{}-", run.id());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pgbouncers().iter().any(|p| p.contains(&ours)) {
        assert!(Instant::now() < deadline, "a PgBouncer started");
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::signal(run.id(), libc::SIGKILL);
    let _ = run.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pgbouncers().iter().any(|p| p.contains(&ours)) {
        assert!(
            Instant::now() < deadline,
            "PgBouncer died with idem: {:?}",
            pgbouncers()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
}

/// The command lines of the PgBouncer processes running now.
fn pgbouncers() -> Vec<String> {
    crate::common::processes()
        .into_iter()
        .map(|p| p.cmdline)
        .filter(|c| c.contains("pgbouncer") && c.contains(".ini"))
        .collect()
}
