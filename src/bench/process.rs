//! Whole `idem race` processes, timed from the outside, beside the disposable cluster's own start and stop.
//!
//! Each sample is a pair, one after the other: an `idem race` process as a
//! user runs it (the disposable cluster included), then a warm start and
//! stop of a cluster alone. Paired so, both see the same machine, and
//! their ratio says what idem adds to the server it needs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::meter::median_ms;
use crate::db::cluster::{Cluster, ClusterOptions};

/// Wall time of `idem race` (the defaults, the disposable cluster) as a
/// user runs it, and of the cluster's own start and stop beside it.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessFigure {
    pub runs: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// A warm start and stop of the cluster alone, median of as many.
    pub cluster_median_ms: f64,
    /// The process's median over the cluster's.
    pub ratio: f64,
}

/// Runs this very binary's `idem race` `runs` times, each followed by a
/// cluster started and stopped with `opts`. The first run may fill the
/// template cache; it is counted like the rest.
pub fn measure(opts: &ClusterOptions, runs: usize, tick: impl Fn()) -> Result<ProcessFigure> {
    let idem = std::env::current_exe().context("could not find idem's own binary")?;
    let mut times = Vec::with_capacity(runs);
    let mut clusters = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut race = Command::new(&idem);
        race.arg("race");
        if let Some(bin) = &opts.pg_bin {
            race.arg("--pg-bin").arg(bin);
        }
        times.push(timed(&mut race, "idem race")?);
        let began = Instant::now();
        Cluster::start(opts)?.stop()?;
        clusters.push(began.elapsed());
        tick();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = median_ms(&mut times.clone());
    let cluster = median_ms(&mut clusters);
    Ok(ProcessFigure {
        runs,
        median_ms: median,
        min_ms: times.first().map_or(0.0, |d| ms(*d)),
        max_ms: times.last().map_or(0.0, |d| ms(*d)),
        cluster_median_ms: cluster,
        ratio: median / cluster,
    })
}

/// Runs `command` (an idem process on its own disposable servers) and
/// times it; its failure is one line naming `what`.
pub(super) fn timed(command: &mut Command, what: &str) -> Result<Duration> {
    let began = Instant::now();
    let out = command
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("could not run {what}"))?;
    let took = began.elapsed();
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            crate::controls::escaped(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    Ok(took)
}
