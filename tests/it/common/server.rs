//! A real PostgreSQL server for `--database-url` tests, holding a user's own objects.
//!
//! The server is a cluster the test starts through idem's library, so the
//! tests need nothing but PostgreSQL's binaries. [`Server::with_user_objects`]
//! fills it the way a careful user's development database might look to
//! idem: ordinary tables with rows, and schemas whose names look like idem's
//! run schemas without being idem's (one even with a forged mark).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use idem::db::{Cluster, ClusterOptions};

/// Schemas a user made whose names have the shape of idem's.
pub const LOOKALIKES: [&str; 3] = ["idem_0badc0de", "idem_1badc0de", "idem_2badc0de"];

pub const USER_OBJECTS: &str = "
CREATE TABLE public.orders (id serial PRIMARY KEY, note text NOT NULL);
INSERT INTO public.orders (note) SELECT 'order ' || g FROM generate_series(1, 3) g;

-- Made by hand, with idem's table names and even idem's old 'kept' comment.
CREATE SCHEMA idem_0badc0de;
COMMENT ON SCHEMA idem_0badc0de IS 'kept by idem';
CREATE TABLE idem_0badc0de.idempotency_keys (
    id serial PRIMARY KEY, key text, status text, completed_at timestamptz);
INSERT INTO idem_0badc0de.idempotency_keys (key, status, completed_at)
VALUES ('a', 'completed', now() - interval '100 hours'), ('b', 'completed', NULL);

-- A table called like idem's mark, of another shape.
CREATE SCHEMA idem_1badc0de;
CREATE TABLE idem_1badc0de.idem_run (note text);
INSERT INTO idem_1badc0de.idem_run VALUES ('mine');

-- The mark's shape, a long-stale heartbeat, but a forged seal.
CREATE SCHEMA idem_2badc0de;
CREATE TABLE idem_2badc0de.idem_run (
    run_id uuid PRIMARY KEY, schema_name text NOT NULL, seal text NOT NULL,
    client_pid integer NOT NULL, kept boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now() - interval '1 day');
INSERT INTO idem_2badc0de.idem_run (run_id, schema_name, seal, client_pid)
VALUES ('2badc0de-0000-4000-8000-000000000000', 'idem_2badc0de', 'forged', 1);
CREATE TABLE idem_2badc0de.experience_points (id int);
INSERT INTO idem_2badc0de.experience_points VALUES (7);
";

/// Everything a user could lose: objects, comments, dependencies, rows.
const STATE: &str = "
SELECT 'object ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
UNION ALL
SELECT 'schema ' || nspname || ' ' || coalesce(obj_description(oid, 'pg_namespace'), '')
FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname !~ '^pg_'
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname FROM pg_constraint
WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'row public.orders ' || o::text FROM public.orders o
UNION ALL
SELECT 'row idem_0badc0de.idempotency_keys ' || k::text FROM idem_0badc0de.idempotency_keys k
UNION ALL
SELECT 'row idem_1badc0de.idem_run ' || r::text FROM idem_1badc0de.idem_run r
UNION ALL
SELECT 'row idem_2badc0de.idem_run ' || r::text FROM idem_2badc0de.idem_run r
UNION ALL
SELECT 'row idem_2badc0de.experience_points ' || x::text FROM idem_2badc0de.experience_points x
ORDER BY 1
";

/// A running server; stopped and removed when dropped.
pub struct Server {
    pub cluster: Cluster,
    /// The port of its socket (and, with TLS, of 127.0.0.1), if not 5432.
    pub port: Option<u16>,
}

/// Every command that touches a user's database, as the trust tests run
/// them against a server holding the user's objects.
pub const EVERY_COMMAND: [&[&str]; 14] = [
    &["race", "-s", "guard", "--work-ms", "1"],
    &["race", "--http", "-s", "guard", "--work-ms", "1"],
    // App processes of their own, each proving the run's schema is idem's.
    &[
        "race",
        "--http",
        "--replicas",
        "2",
        "-s",
        "memory",
        "--work-ms",
        "1",
    ],
    &[
        "matrix",
        "--runs",
        "1",
        "-s",
        "guard,advisory-lock",
        "--work-ms",
        "1",
    ],
    &["doctor"],
    &["compare", "--work-ms", "1"],
    &["stores", "--runs", "1", "--cache-max-entries", "20"],
    &["keys"],
    &[
        "step",
        "--workers",
        "2",
        "--work-ms",
        "0",
        "--schedule",
        "1,2,1,2",
    ],
    &[
        "scenario",
        "run",
        "scenarios/2-schedule-claim-work-complete.toml",
    ],
    &["lesson", "4", "--no-pause"],
    &["challenge"],
    &["reap", "--older-than", "1d"],
    // Every section that works in the database it is given.
    &[
        "bench",
        "--quick",
        "--only",
        "races,client,throughput,wire,hot-key,scale",
    ],
];

impl Server {
    /// An empty server.
    pub fn start() -> Self {
        Self {
            cluster: Cluster::start(&ClusterOptions::default()).expect("a test server starts"),
            port: None,
        }
    }

    /// A server that listens on 127.0.0.1 too, and takes only TLS there
    /// (`hostssl` in pg_hba.conf), with `leaf`'s certificate; its socket
    /// stays open to the tests' own psql.
    pub fn tls_only(leaf: &super::certs::Leaf) -> Self {
        if super::is_root() {
            for file in [&leaf.cert, &leaf.key] {
                super::chown_to_postgres(file);
            }
        }
        let mode = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(&leaf.key, mode).unwrap();
        let port = super::free_port();
        let options = ClusterOptions {
            server_settings: vec![
                "listen_addresses=127.0.0.1".into(),
                format!("port={port}"),
                "ssl=on".into(),
                format!("ssl_cert_file={}", leaf.cert.display()),
                format!("ssl_key_file={}", leaf.key.display()),
            ],
            ..ClusterOptions::default()
        };
        let server = Self {
            cluster: Cluster::start(&options).expect("a TLS test server starts"),
            port: Some(port),
        };
        let hba = server.cluster.run_dir.join("data").join("pg_hba.conf");
        std::fs::write(
            &hba,
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        server.psql("SELECT pg_reload_conf()");
        // The reload is a signal: wait until a plain TCP connection is refused.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let plain = Command::new(server.cluster.bins.dir.join("psql"))
                .arg(format!(
                    "host=127.0.0.1 port={port} user=postgres dbname=postgres sslmode=disable"
                ))
                .args(["-X", "-At", "-c", "SELECT 1"])
                .output()
                .unwrap();
            if !plain.status.success() {
                return server;
            }
            assert!(Instant::now() < deadline, "pg_hba.conf took hold");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A URL to the TLS server over 127.0.0.1, with these parameters.
    pub fn tcp_url(&self, params: &str) -> String {
        let port = self.port.expect("a server listening on TCP");
        format!("postgres://postgres@127.0.0.1:{port}/postgres?{params}")
    }

    /// A server holding the user's objects above.
    pub fn with_user_objects() -> Self {
        let server = Self::start();
        server.psql(USER_OBJECTS);
        server
    }

    /// The URL idem is given.
    pub fn url(&self) -> String {
        let port = self.port.map(|p| format!("&port={p}")).unwrap_or_default();
        format!(
            "postgres://postgres@localhost/postgres?host={}{port}",
            self.socket().display()
        )
    }

    pub fn socket(&self) -> &Path {
        self.cluster.socket_dir()
    }

    /// Runs SQL with psql and returns its unaligned output; panics on an error.
    pub fn psql(&self, sql: &str) -> String {
        let port = self.port.unwrap_or(5432).to_string();
        let out = Command::new(self.cluster.bins.dir.join("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-p",
                &port,
                "-h",
            ])
            .arg(self.socket())
            .args(["-U", "postgres", "-d", "postgres", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "{sql}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Moves a run's last heartbeat `seconds` into the past, as if the run
    /// had been silent that long.
    pub fn silence(&self, schema: &str, seconds: u64) {
        self.psql(&format!(
            "UPDATE {schema}.idem_run SET heartbeat_at = now() - make_interval(secs => {seconds})"
        ));
    }

    /// The user's objects and rows, line by line (with the user's fixture loaded).
    pub fn user_state(&self) -> Vec<String> {
        self.psql(STATE).lines().map(str::to_string).collect()
    }

    /// The schemas idem has made and not dropped: those with a mark table.
    pub fn idem_schemas(&self) -> Vec<String> {
        self.psql(
            "SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
             WHERE c.relname = 'idem_run' AND n.nspname !~ 'badc0de' ORDER BY 1",
        )
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// Waits until a run's schema other than `known` has its tables, and returns it.
    pub fn wait_for_run_schema(&self, known: &[String], limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let found = self.psql(
                "SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
                 WHERE c.relname = 'experience_points' AND n.nspname ~ '^idem_[0-9a-f]{8}$'
                   AND n.nspname !~ 'badc0de'
                   AND EXISTS (SELECT 1 FROM pg_class m WHERE m.relnamespace = n.oid
                               AND m.relname = 'cache_entries')",
            );
            if let Some(schema) = found.lines().find(|s| !known.iter().any(|k| k == s)) {
                return schema.to_string();
            }
            assert!(Instant::now() < deadline, "no run schema appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `idem serve` on `url`, and `idem probe` at it: five identical awards at
/// once, their XP rows counted through `url` too. Serve is then stopped
/// with SIGINT and must exit 0, its schema dropped. Returns the probe's
/// report.
pub fn serve_probed(sandbox: &super::Sandbox, url: &str) -> String {
    let mut serve = sandbox
        .idem_std()
        .args(["serve", "--json", "--listen", "127.0.0.1:0"])
        .args(["--database-url", url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ready: serde_json::Value =
        serde_json::from_str(&super::first_line_then_drain(&mut serve)).unwrap();
    let count = format!(
        "SELECT count(*) FROM {}.experience_points",
        ready["schema"].as_str().unwrap()
    );
    let out = sandbox
        .idem()
        .args(["probe", ready["endpoint"].as_str().unwrap()])
        .args(["-d", r#"{"user_id": 42, "amount": 10}"#])
        .args(["--count-sql", &count, "--count-database-url", url])
        .output()
        .unwrap();
    super::signal(serve.id(), libc::SIGINT);
    assert_eq!(
        serve.wait().unwrap().code(),
        Some(0),
        "serve stops and drops its schema"
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
