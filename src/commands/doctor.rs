//! `idem doctor`: which PostgreSQL idem found and how fast its cluster comes and goes.

use std::fmt::Write;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::command::{Command, Given, Needs, Nothing, OnSignal, Stop};
use crate::cli::measure::DoctorArgs;
use crate::db::book;
use crate::db::pooled::{self, Pooled};
use crate::db::standby::Standby;
use crate::db::{Backend, ConnectOptions, Database, Encryption};
use crate::report::Output;
use crate::report::style::{dim, strong};

/// What the doctor found.
#[derive(Debug, Serialize)]
pub struct Findings {
    /// `disposable` or `server`.
    pub backend: &'static str,
    pub server_version: String,
    pub schema: String,
    pub free_connections: u64,
    pub url: Option<String>,
    pub pg_bin: Option<String>,
    pub template: Option<String>,
    pub template_made_now: Option<bool>,
    pub run_dir: Option<String>,
    pub start_ms: Option<f64>,
    pub stop_ms: Option<f64>,
    /// The bookkeeping connection (sqlx), as the server sees it.
    pub bookkeeping_tls: Encryption,
    /// A workers' connection (the pool's tokio-postgres), as the server sees it.
    pub workers_tls: Encryption,
    /// On a server: whether a pooler stands in front of it (PgBouncer's
    /// console, two connections sharing a server process); `null` for the
    /// disposable cluster.
    pub pooler: Option<Pooled>,
    /// With `--standby`: the hot standby started beside the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyFindings>,
}

/// What `--standby` found: a hot standby of the disposable cluster.
#[derive(Debug, Serialize)]
pub struct StandbyFindings {
    pub run_dir: String,
    /// From the base backup's start to the standby accepting connections.
    pub start_ms: f64,
    /// From a row's commit on the primary to its being read on the standby.
    pub replayed_ms: f64,
    /// WAL the standby had not replayed when the row was read, in bytes,
    /// from the primary's `pg_stat_replication`.
    pub lag_bytes: i64,
}

/// `idem doctor`: what idem finds on the database it is given.
pub struct Plan {
    db: ConnectOptions,
    pub(crate) out: Output,
    /// Start a hot standby too (`--standby`).
    standby: bool,
}

pub fn plan(args: &DoctorArgs) -> Result<Plan> {
    let db = args.connect.options();
    if args.standby && db.database_url.is_some() {
        anyhow::bail!(
            "--standby starts a standby of idem's own disposable cluster; idem never \
             reconfigures your server: drop --database-url"
        );
    }
    Ok(Plan {
        db,
        out: Output::from_json_flag(args.json),
        standby: args.standby,
    })
}

/// The database is the doctor's own to open and close, so that its stop is
/// timed: a signal abandons the start-up, and once it is open the doctor
/// finishes and closes it.
impl Command for Plan {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(()).on_signal(OnSignal::Tells)
    }

    async fn run(self, _: &Nothing, mut given: Given) -> Result<()> {
        let db = tokio::select! {
            biased;
            signal = given.stop.requested() => return Err(signal.into()),
            db = Database::open(&self.db) => db?,
        };
        examine(db, self.out, self.standby, &mut given.stop).await
    }
}

/// Looks around, closes the database (timing the stop), and reports. A
/// signal while the standby starts (a second or more) ends the doctor as
/// it ends every command: the standby and the cluster removed, and the
/// signal's exit status.
async fn examine(db: Database, out: Output, standby: bool, stop: &mut Stop) -> Result<()> {
    let (bookkeeping_tls, workers_tls) = db.encryption().await?;
    let mut findings = Findings {
        backend: "server",
        server_version: db.server_version().await?,
        schema: db.schema.clone(),
        free_connections: db.free_connections().await?,
        url: None,
        pg_bin: None,
        template: None,
        template_made_now: None,
        run_dir: None,
        start_ms: None,
        stop_ms: None,
        bookkeeping_tls,
        workers_tls,
        pooler: None,
        standby: None,
    };
    match &db.backend {
        Backend::Embedded(cluster) => {
            findings.backend = "disposable";
            findings.pg_bin = Some(cluster.bins.dir.display().to_string());
            findings.template = Some(cluster.template.dir.display().to_string());
            findings.template_made_now = Some(cluster.template.made_now);
            findings.run_dir = Some(cluster.run_dir.display().to_string());
            findings.start_ms = Some(cluster.start_time.as_secs_f64() * 1000.0);
        }
        Backend::Server { url } => {
            findings.url = Some(url.clone());
            findings.pooler = Some(pooled::look(db.workers_config()).await);
        }
    }
    // The standby stops (and is removed) before the primary it follows.
    let standing = match standby {
        true => {
            let examined = tokio::select! {
                biased;
                signal = stop.requested() => Err(signal),
                examined = examine_standby(&db) => Ok(examined),
            };
            match examined {
                Ok(examined) => Some(examined?),
                Err(signal) => {
                    db.close().await?;
                    return Err(signal.into());
                }
            }
        }
        false => None,
    };
    if let Some((found, standby)) = standing {
        findings.standby = Some(found);
        drop(standby);
    }
    findings.stop_ms = db.close().await?.map(|d| d.as_secs_f64() * 1000.0);
    out.record(&findings, render)
}

/// Starts a hot standby of the cluster, writes a row on the primary and
/// times how soon the standby reads it.
async fn examine_standby(db: &Database) -> Result<(StandbyFindings, Standby)> {
    let Backend::Embedded(cluster) = &db.backend else {
        anyhow::bail!("--standby needs idem's own disposable cluster");
    };
    let began = Instant::now();
    // A second or so of pg_basebackup and start-up: nothing else runs meanwhile.
    let standby = Standby::start(cluster, Default::default()).await?;
    let start_ms = began.elapsed().as_secs_f64() * 1000.0;
    let reader = standby.connect().await?;
    let mut tx = db.book().await?;
    let id: i64 = book::query_scalar(&db.sql(
        "INSERT INTO experience_points (user_id, amount, lesson, worker) VALUES (0, 0, 0, 0) RETURNING id",
    ))
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let committed = Instant::now();
    let read = db.sql("SELECT count(*) FROM experience_points WHERE id = $1");
    loop {
        let seen: i64 = reader.query_one(&*read, &[&id]).await?.get(0);
        if seen == 1 {
            break;
        }
        if committed.elapsed() > REPLAY_LIMIT {
            anyhow::bail!(
                "the standby did not replay a committed row within {} s",
                REPLAY_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let replayed_ms = committed.elapsed().as_secs_f64() * 1000.0;
    let (lag_bytes, _) = standby.lag(db).await?;
    let found = StandbyFindings {
        run_dir: standby.socket_dir().display().to_string(),
        start_ms,
        replayed_ms,
        lag_bytes,
    };
    Ok((found, standby))
}

/// How long the standby may take to replay one committed row.
const REPLAY_LIMIT: Duration = Duration::from_secs(10);

/// One `name  value` line of the report.
type Row<'a> = dyn FnMut(&str, String) + 'a;

fn render(f: &Findings) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", strong("idem doctor"));
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<18} {value}");
    };
    row("PostgreSQL", f.server_version.clone());
    match f.backend {
        "disposable" => disposable_rows(f, &mut row),
        _ => {
            row("database", f.url.clone().unwrap_or_default());
            if let Some(pooler) = &f.pooler {
                row("pooler", pooler.describe());
            }
        }
    }
    let tls = match (f.bookkeeping_tls.describe(), f.workers_tls.describe()) {
        (bookkeeping, workers) if bookkeeping == workers => bookkeeping,
        (bookkeeping, workers) => format!("bookkeeping {bookkeeping}, workers {workers}"),
    };
    let over = match f.backend {
        "disposable" => dim(" (a unix socket: nothing to encrypt)").to_string(),
        _ => String::new(),
    };
    row("connections", format!("{tls}{over}"));
    row(
        "schema",
        format!("{} {}", f.schema, dim("(this run's own; dropped at exit)")),
    );
    row("free connections", f.free_connections.to_string());
    if let Some(standby) = &f.standby {
        standby_rows(standby, &mut row);
    }
    out
}

/// The disposable cluster's rows: where it came from, how long it took.
fn disposable_rows(f: &Findings, row: &mut Row<'_>) {
    row(
        "database",
        "a disposable cluster (no --database-url given)".into(),
    );
    row("binaries", f.pg_bin.clone().unwrap_or_default());
    let made = if f.template_made_now == Some(true) {
        "made by this run with initdb"
    } else {
        "cached"
    };
    let template = f.template.clone().unwrap_or_default();
    row(
        "template",
        format!("{template} {}", dim(format!("({made})"))),
    );
    let run_dir = f.run_dir.clone().unwrap_or_default();
    row("run directory", format!("{run_dir} {}", dim("(removed)")));
    row(
        "start",
        format!(
            "{:.0} ms (copy the template, start, accept connections)",
            f.start_ms.unwrap_or(0.0)
        ),
    );
    row(
        "stop",
        format!(
            "{:.0} ms (immediate shutdown, remove files)",
            f.stop_ms.unwrap_or(0.0)
        ),
    );
}

/// The hot standby's rows (`--standby`).
fn standby_rows(standby: &StandbyFindings, row: &mut Row<'_>) {
    row(
        "hot standby",
        format!(
            "{} {}",
            standby.run_dir,
            dim(format!(
                "(pg_basebackup and start-up {:.0} ms; removed at exit)",
                standby.start_ms
            ))
        ),
    );
    row(
        "replay",
        format!(
            "a committed row read on the standby after {:.1} ms; {} bytes of WAL behind then",
            standby.replayed_ms, standby.lag_bytes
        ),
    );
}
