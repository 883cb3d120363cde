//! Whole `idem race` processes, timed from the outside: start the disposable cluster, race, stop, clean up.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// Wall time of `idem race` (the defaults, the disposable cluster) as a user runs it.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessFigure {
    pub runs: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

/// Runs this very binary's `idem race` `runs` times, one after another.
/// The first run may fill the template cache; it is counted like the rest.
pub fn measure(runs: usize, tick: impl Fn()) -> Result<ProcessFigure> {
    let idem = std::env::current_exe().context("could not find idem's own binary")?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let began = Instant::now();
        let status = Command::new(&idem)
            .arg("race")
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("could not run idem race")?;
        times.push(began.elapsed());
        if !status.status.success() {
            bail!(
                "idem race failed: {}",
                String::from_utf8_lossy(&status.stderr).trim()
            );
        }
        tick();
    }
    times.sort();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    Ok(ProcessFigure {
        runs,
        median_ms: super::meter::median_ms(&mut times.clone()),
        min_ms: times.first().map_or(0.0, |d| ms(*d)),
        max_ms: times.last().map_or(0.0, |d| ms(*d)),
    })
}
