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
