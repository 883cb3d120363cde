//! `idem doctor`: which PostgreSQL idem found and how fast its cluster comes and goes.

use std::fmt::Write;

use anyhow::Result;
use serde::Serialize;

use super::command::{Command, Given, Needs, Nothing, OnSignal};
use crate::cli::measure::DoctorArgs;
use crate::db::pooled::{self, Pooled};
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
}

/// `idem doctor`: what idem finds on the database it is given.
pub struct Plan {
    pub db: ConnectOptions,
    pub out: Output,
}

pub fn plan(args: &DoctorArgs) -> Plan {
    Plan {
        db: args.connect.options(),
        out: Output::from_json_flag(args.json),
    }
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
        examine(db, self.out).await
    }
}

/// Looks around, closes the database (timing the stop), and reports.
async fn examine(db: Database, out: Output) -> Result<()> {
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
    findings.stop_ms = db.close().await?.map(|d| d.as_secs_f64() * 1000.0);
    out.record(&findings, render)
}

fn render(f: &Findings) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", strong("idem doctor"));
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<18} {value}");
    };
    row("PostgreSQL", f.server_version.clone());
    match f.backend {
        "disposable" => {
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
            row(
                "template",
                format!(
                    "{} {}",
                    f.template.clone().unwrap_or_default(),
                    dim(format!("({made})"))
                ),
            );
            row(
                "run directory",
                format!(
                    "{} {}",
                    f.run_dir.clone().unwrap_or_default(),
                    dim("(removed)")
                ),
            );
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
                    "{:.0} ms (fast shutdown, remove files)",
                    f.stop_ms.unwrap_or(0.0)
                ),
            );
        }
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
    out
}
