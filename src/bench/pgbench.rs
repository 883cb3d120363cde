//! One reference figure from PostgreSQL's own client: pgbench running a script of idem's statements.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::meter;
use super::script::Script;
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
    crate::files::write::replace(&file, script.pgbench_text().as_bytes(), "pgbench's script")?;
    let (bin, socket, schema) = (
        pgbench.clone(),
        cluster.socket_dir().to_path_buf(),
        db.schema.clone(),
    );
    let (tps, cpu_us) = tokio::task::spawn_blocking(move || {
        let before = meter::cpu_us(meter::Who::Children);
        let tps = run(&bin, &socket, &schema, &file, clients, seconds)?;
        anyhow::Ok((tps, meter::cpu_us(meter::Who::Children) - before))
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
