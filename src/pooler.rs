//! What a pooler in transaction mode does to a session's state, shown live: the same steps directly and through a real PgBouncer.
//!
//! In transaction mode PgBouncer lends a server connection for one
//! transaction, then gives it to whichever client asks next. What a
//! client leaves in its session (a setting, a session lock, a prepared
//! statement) stays with the server connection, not with the client. Each
//! finding runs two clients through a PgBouncer of its own, and the same
//! two clients directly, and says what each saw.

use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio_postgres::{Client, Config, NoTls};

use crate::db::cluster::Cluster;
use crate::db::pgbouncer::Bouncer;

/// One thing transaction pooling breaks, as seen over a number of runs.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// `setting`, `advisory_lock`, `prepared_statement`.
    pub name: &'static str,
    /// What the two clients do.
    pub steps: &'static str,
    /// What the second client saw, directly and through PgBouncer (last run).
    pub direct: String,
    pub pooled: String,
    /// Runs in which the pooled result differed from the direct one.
    pub broken_runs: u64,
    pub runs: u64,
    /// What it means for an app, and for idem.
    pub meaning: &'static str,
}

/// Everything `idem pooler` found.
#[derive(Debug, Clone, Serialize)]
pub struct PoolerReport {
    /// `pgbouncer --version`'s first line.
    pub pgbouncer: String,
    pub pool_mode: &'static str,
    pub findings: Vec<Finding>,
}

/// The findings' names, as `idem pooler` and scenario files name them.
pub const FINDINGS: [&str; 3] = [SHAPES[0].name, SHAPES[1].name, SHAPES[2].name];

/// The findings (all three, or the one named `only`), `runs` times each,
/// against `cluster`.
pub async fn run(
    program: &std::path::Path,
    cluster: &Cluster,
    runs: u64,
    only: Option<&str>,
) -> Result<PoolerReport> {
    let version = std::process::Command::new(program)
        .arg("--version")
        .output()
        .context("could not ask PgBouncer its version")?;
    let pgbouncer = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or("PgBouncer")
        .to_string();
    let direct = direct_config(cluster);
    let mut findings = Vec::new();
    for shape in SHAPES.iter().filter(|s| only.is_none_or(|n| n == s.name)) {
        let mut finding = Finding {
            name: shape.name,
            steps: shape.steps,
            direct: String::new(),
            pooled: String::new(),
            broken_runs: 0,
            runs,
            meaning: shape.meaning,
        };
        for _ in 0..runs {
            // Starting and stopping PgBouncer waits on a process: off the
            // runtime's async threads.
            let bouncer = tokio::task::block_in_place(|| {
                Bouncer::start(program, cluster.front(), shape.server_connections, None)
            })?;
            finding.direct = (shape.run)(&direct).await?;
            let pooled = (shape.run)(&bouncer.client_config()).await;
            tokio::task::block_in_place(|| drop(bouncer));
            finding.pooled = pooled?;
            finding.broken_runs += u64::from(finding.pooled != finding.direct);
        }
        findings.push(finding);
    }
    Ok(PoolerReport {
        pgbouncer,
        pool_mode: "transaction",
        findings,
    })
}

/// Two clients' steps against one way in: what the second saw.
type Steps = for<'a> fn(&'a Config) -> Seen<'a>;

type Seen<'a> = std::pin::Pin<Box<dyn Future<Output = Result<String>> + Send + 'a>>;

/// One finding: its two clients' steps, and how many server connections
/// PgBouncer may open for them.
struct Shape {
    name: &'static str,
    steps: &'static str,
    meaning: &'static str,
    server_connections: u32,
    run: Steps,
}

const SHAPES: [Shape; 3] = [
    Shape {
        name: "setting",
        steps: "A: SET lock_timeout = '1234ms'; then B: SHOW lock_timeout",
        meaning: "a session setting stays with the server connection, so whoever gets it \
                  next has the setting, and its own client, sent elsewhere, may not: use \
                  SET LOCAL inside a transaction",
        server_connections: 1,
        run: |c| Box::pin(setting(c)),
    },
    Shape {
        name: "advisory_lock",
        steps: "A: SELECT pg_advisory_lock(4242); then B: SELECT pg_try_advisory_lock(4242)",
        meaning: "a session lock belongs to the server connection: another client takes it \
                  as its own, so it excludes no one; use pg_advisory_xact_lock in a \
                  transaction, as idem's liveness lock is: held in a transaction kept \
                  open, which the pooler keeps on one server connection",
        server_connections: 1,
        run: |c| Box::pin(advisory_lock(c)),
    },
    Shape {
        name: "prepared_statement",
        steps: "A: prepare SELECT 1; B: BEGIN; then A: execute it",
        meaning: "a protocol-level prepared statement lives on the server connection that \
                  parsed it; PgBouncer 1.18 does not follow it, so a pooled statement cache \
                  (deadpool's, sqlx's) fails once its client lands elsewhere; idem sends every \
                  statement unnamed, parsed, bound and run in one round trip",
        server_connections: 2,
        run: |c| Box::pin(prepared_statement(c)),
    },
];

/// The cluster reached directly, on its unix socket.
fn direct_config(cluster: &Cluster) -> Config {
    let mut config = Config::new();
    config
        .host_path(cluster.socket_dir())
        .user("postgres")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(10));
    config
}

async fn connect(config: &Config) -> Result<Client> {
    let (client, connection) = config.connect(NoTls).await.context("could not connect")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// What B reads of a setting A made.
async fn setting(config: &Config) -> Result<String> {
    let (a, b) = (connect(config).await?, connect(config).await?);
    a.batch_execute("SET lock_timeout = '1234ms'").await?;
    let row = b.query_one("SHOW lock_timeout", &[]).await?;
    let seen: String = row.get(0);
    // Leave the server connection as it was found.
    a.batch_execute("RESET lock_timeout").await?;
    Ok(format!("B sees lock_timeout = {seen}"))
}

/// Whether B gets the lock A holds.
async fn advisory_lock(config: &Config) -> Result<String> {
    let (a, b) = (connect(config).await?, connect(config).await?);
    a.batch_execute("SELECT pg_advisory_lock(4242)").await?;
    let got: bool = b
        .query_one("SELECT pg_try_advisory_lock(4242)", &[])
        .await?
        .get(0);
    for client in [&a, &b] {
        client
            .batch_execute("SELECT pg_advisory_unlock_all()")
            .await?;
    }
    Ok(match got {
        true => "B got the lock A holds".to_string(),
        false => "B was refused the lock A holds".to_string(),
    })
}

/// Whether A can run what it prepared once B holds the connection it was
/// prepared on.
async fn prepared_statement(config: &Config) -> Result<String> {
    let (a, b) = (connect(config).await?, connect(config).await?);
    let statement = a.prepare("SELECT 1").await?;
    b.batch_execute("BEGIN").await?;
    let ran = a.query(&statement, &[]).await;
    b.batch_execute("ROLLBACK").await?;
    Ok(match ran {
        Ok(_) => "A ran its statement".to_string(),
        Err(err) => format!(
            "A was told: {}",
            err.as_db_error()
                .map_or_else(|| err.to_string(), |db| db.message().to_string())
        ),
    })
}
