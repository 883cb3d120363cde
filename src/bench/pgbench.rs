//! One reference figure from PostgreSQL's own client: pgbench running the raw floor's statement.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::db::{Backend, Database};

/// What pgbench measured for one script.
#[derive(Debug, Clone, Serialize)]
pub struct PgbenchFigure {
    /// `raw` (insert-unique's statement) or `claim-work-complete` (its three).
    pub script: &'static str,
    pub clients: usize,
    pub seconds: u64,
    /// Requests (script runs) per second.
    pub tps: f64,
}

/// The raw floor: insert-unique's one statement.
const RAW: &str = "\\set k random(1, 1000000000000)
INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
  VALUES (:k, 10, 1, 'k' || :k, 1) ON CONFLICT (idempotency_key) DO NOTHING;
";

/// claim-work-complete's three statements, as the strategy sends them.
const CLAIM_WORK_COMPLETE: &str = "\\set k random(1, 1000000000000)
INSERT INTO idempotency_keys (key, operation, status, request_fingerprint, worker, locked_at)
  VALUES ('k' || :k, 'award_xp', 'pending', 'fingerprint', 1, now()) ON CONFLICT (key) DO NOTHING RETURNING id;
INSERT INTO experience_points (user_id, amount, lesson, worker) VALUES (:k, 10, 1, 1) RETURNING id;
UPDATE idempotency_keys SET status = 'completed', response_code = 201,
  response_body = '{\"xp_id\": 1, \"amount\": 10}', completed_at = now() WHERE key = 'k' || :k;
";

/// Runs pgbench (when the server binaries include it) on the same cluster,
/// once with the raw statement and once with claim-work-complete's three:
/// PostgreSQL's own client, for reference. Empty if there is no pgbench.
pub async fn measure(db: &Database, clients: usize, seconds: u64) -> Result<Vec<PgbenchFigure>> {
    let Backend::Embedded(cluster) = &db.backend else {
        return Ok(Vec::new());
    };
    let pgbench = cluster.bins.dir.join("pgbench");
    if !pgbench.is_file() {
        return Ok(Vec::new());
    }
    let mut figures = Vec::new();
    for (name, text) in [("raw", RAW), ("claim-work-complete", CLAIM_WORK_COMPLETE)] {
        db.truncate().await?;
        let script = cluster.run_dir.join(format!("{name}.sql"));
        std::fs::write(&script, text)?;
        let (bin, socket, schema) = (
            pgbench.clone(),
            cluster.socket_dir().to_path_buf(),
            db.schema.clone(),
        );
        let tps = tokio::task::spawn_blocking(move || {
            run(&bin, &socket, &schema, &script, clients, seconds)
        })
        .await??;
        figures.push(PgbenchFigure {
            script: name,
            clients,
            seconds,
            tps,
        });
    }
    Ok(figures)
}

fn run(
    pgbench: &Path,
    socket: &Path,
    schema: &str,
    script: &Path,
    clients: usize,
    seconds: u64,
) -> Result<f64> {
    let out = Command::new(pgbench)
        .args(["-n", "-M", "prepared", "-U", "postgres", "-h"])
        .arg(socket)
        .args([
            "-c",
            &clients.to_string(),
            "-j",
            "2",
            "-T",
            &seconds.to_string(),
            "-f",
        ])
        .arg(script)
        .arg("postgres")
        .env("PGOPTIONS", format!("-c search_path={schema}"))
        .output()
        .context("could not run pgbench")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "pgbench failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        );
    }
    // "tps = 21234.567890 (without initial connection time)"
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .context("pgbench printed no tps")
}
