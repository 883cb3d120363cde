//! Disposable cluster start-up and shut-down, cold and warm.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::meter::median_ms;
use crate::db::binaries::PgBinaries;
use crate::db::template::private_dir;
use crate::db::{Cluster, ClusterOptions};

/// Start and stop of a disposable cluster, medians in ms.
#[derive(Debug, Serialize)]
pub struct ClusterFigures {
    /// A start with no template: initdb, copy, start, ready.
    pub cold_start_ms: f64,
    /// A start from the cached template: copy, start, ready.
    pub warm_start_ms: f64,
    pub stop_ms: f64,
    pub cold_samples: usize,
    pub warm_samples: usize,
}

/// Starts and stops clusters: cold ones from an empty template cache, warm
/// ones from the cached template. `None` when there are no server binaries.
pub fn measure(
    opts: &ClusterOptions,
    cold_samples: usize,
    warm_samples: usize,
    tick: impl Fn(),
) -> Result<Option<ClusterFigures>> {
    if PgBinaries::locate(opts.pg_bin.as_deref()).is_err() {
        return Ok(None);
    }
    let scratch = private_dir(&std::env::temp_dir(), "idem-bench")?;
    let measured = (|| -> Result<ClusterFigures> {
        let mut cold: Vec<Duration> = Vec::new();
        let mut stops = Vec::new();
        for sample in 0..cold_samples {
            let opts = ClusterOptions {
                template_cache: Some(scratch.join(format!("cache-{sample}"))),
                ..opts.clone()
            };
            let began = Instant::now();
            let cluster = Cluster::start(&opts)?;
            cold.push(began.elapsed());
            stops.push(cluster.stop()?);
            tick();
        }
        let mut warm = Vec::new();
        for _ in 0..warm_samples {
            let began = Instant::now();
            let cluster = Cluster::start(opts)?;
            warm.push(began.elapsed());
            stops.push(cluster.stop()?);
            tick();
        }
        Ok(ClusterFigures {
            cold_start_ms: median_ms(&mut cold),
            warm_start_ms: median_ms(&mut warm),
            stop_ms: median_ms(&mut stops),
            cold_samples,
            warm_samples,
        })
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    measured.map(Some)
}
