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
    /// pgbench's own CPU time (user and system) per request, µs.
    pub cpu_us_per_request: f64,
}

/// The raw floor: insert-unique's one statement.
const RAW: &str = "\\set k random(1, 1000000000000)
INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
  VALUES (:k, 10, 1, 'k' || :k, 1) ON CONFLICT (idempotency_key) DO NOTHING;
";

/// claim-work-complete's three statements, as the strategy sends them: the
/// claim's id and the XP row's id carried from one to the next (`\\gset`).
const CLAIM_WORK_COMPLETE: &str = "\\set k random(1, 1000000000000)
INSERT INTO idempotency_keys (key, operation, status, request_fingerprint, worker, locked_at)
  VALUES ('k' || :k, 'award_xp', 'pending', 'fingerprint', 1, now())
  ON CONFLICT (key) DO NOTHING RETURNING id AS claim \\gset
INSERT INTO experience_points (user_id, amount, lesson, worker)
  VALUES (:k, 10, 1, 1) RETURNING id AS xp \\gset
UPDATE idempotency_keys SET status = 'completed', response_code = 201,
  response_body = jsonb_build_object('xp_id', (:xp)::bigint, 'amount', 10), completed_at = now()
  WHERE id = (:claim)::bigint;
";

/// The statements pgbench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// insert-unique's one statement.
    Raw,
    /// claim-work-complete's three.
    ClaimWorkComplete,
}

impl Script {
    pub fn name(self) -> &'static str {
        match self {
            Script::Raw => "raw",
            Script::ClaimWorkComplete => "claim-work-complete",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Script::Raw => RAW,
            Script::ClaimWorkComplete => CLAIM_WORK_COMPLETE,
        }
    }
}

/// Runs pgbench (when the server binaries include it) with `script` on the
/// same cluster, prepared statements, `clients` connections for `seconds`:
/// PostgreSQL's own client. `None` without pgbench or on another server.
pub async fn measure(
    db: &Database,
    script: Script,
    clients: usize,
    seconds: u64,
) -> Result<Option<PgbenchFigure>> {
    let Backend::Embedded(cluster) = &db.backend else {
        return Ok(None);
    };
    let pgbench = cluster.bins.dir.join("pgbench");
    if !pgbench.is_file() {
        return Ok(None);
    }
    db.truncate().await?;
    let file = cluster.run_dir.join(format!("{}.sql", script.name()));
    std::fs::write(&file, script.text())?;
    let (bin, socket, schema) = (
        pgbench.clone(),
        cluster.socket_dir().to_path_buf(),
        db.schema.clone(),
    );
    let (tps, cpu_us) = tokio::task::spawn_blocking(move || {
        let before = super::cpu_us(super::Who::Children);
        let tps = run(&bin, &socket, &schema, &file, clients, seconds)?;
        anyhow::Ok((tps, super::cpu_us(super::Who::Children) - before))
    })
    .await??;
    let requests = (tps * seconds as f64).max(1.0);
    Ok(Some(PgbenchFigure {
        script: script.name(),
        clients,
        seconds,
        tps,
        cpu_us_per_request: cpu_us / requests,
    }))
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
            &super::throughput::CLIENT_THREADS.to_string(),
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
