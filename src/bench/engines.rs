//! The engines side by side: MariaDB's disposable server started and stopped, whole `idem race` processes on each engine, and how often lesson 1's figure comes on each.
//!
//! Every figure is taken from this very binary run as a user runs it, one
//! engine after the other in pairs, so that both see the same machine.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::meter::median_ms;
use crate::db::mariadb::server::{MariadbBinaries, MariadbServer};
use crate::db::template::private_dir;

/// Start and stop of a disposable MariaDB, medians in ms.
#[derive(Debug, Serialize)]
pub struct MariadbStarts {
    pub version: String,
    /// With no template: `mariadb-install-db`, copy, start, ready.
    pub cold_start_ms: f64,
    /// From the cached template: copy, start, ready.
    pub warm_start_ms: f64,
    pub stop_ms: f64,
    pub cold_samples: usize,
    pub warm_samples: usize,
}

/// Whole idem processes of one command (its server included), one engine
/// beside the other.
#[derive(Debug, Serialize)]
pub struct EngineProcesses {
    /// The command, less `--engine`: `idem race`.
    pub command: String,
    pub runs: usize,
    pub postgres_median_ms: f64,
    pub mariadb_median_ms: f64,
    /// MariaDB's median over PostgreSQL's.
    pub ratio: f64,
}

/// How often `idem race` (the course's check-then-store, pool of five)
/// gave lesson 1's figure, on each engine.
#[derive(Debug, Serialize)]
pub struct FigureRate {
    pub engine: &'static str,
    pub runs: usize,
    /// Runs with 1 key row and 4 XP rows.
    pub hits: usize,
    pub rate: f64,
}

/// Everything the engines section measured; `None` with no MariaDB here.
#[derive(Debug, Serialize)]
pub struct EngineFigures {
    pub mariadb: MariadbStarts,
    /// `idem race`, the default race.
    pub processes: EngineProcesses,
    /// `idem explore -s check-then-store`: every interleaving of two
    /// requests.
    pub explore: EngineProcesses,
    pub lesson_one: Vec<FigureRate>,
    /// `idem race --engine mariadb --nodes 3`: a Galera cluster's start,
    /// race and stop in one process; `None` without galera-4 here.
    pub cluster: Option<ClusterProcess>,
}

/// Whole `idem race` processes on a three-node Galera cluster, and the
/// race alone (its `elapsed_ms`, start and stop left out) beside the same
/// race on one MariaDB server.
#[derive(Debug, Serialize)]
pub struct ClusterProcess {
    pub runs: usize,
    pub median_ms: f64,
    /// Races timed alone, on each.
    pub races: usize,
    pub race_median_ms: f64,
    pub one_server_race_median_ms: f64,
    /// The cluster's race over the one server's.
    pub race_ratio: f64,
}

/// Races run in each process when the race alone is timed.
const RACES_TIMED: usize = 10;

/// What to measure, and how many times.
#[derive(Debug, Clone, Copy)]
pub struct Samples {
    pub cold: usize,
    pub warm: usize,
    pub processes: usize,
    pub figure_runs: usize,
    /// Whole races on a Galera cluster (10 s each).
    pub cluster: usize,
}

/// Measures the section; `None` when there is no `mariadbd` to start.
pub fn measure(
    bin: Option<&std::path::Path>,
    samples: &Samples,
    tick: impl Fn(),
) -> Result<Option<EngineFigures>> {
    let Ok(bins) = MariadbBinaries::locate(bin) else {
        return Ok(None);
    };
    let mariadb = starts(&bins, bin, samples, &tick)?;
    let races = processes(&["race"], bin, samples.processes, &tick)?;
    let explore = processes(
        &["explore", "-s", "check-then-store"],
        bin,
        samples.processes,
        &tick,
    )?;
    let mut lesson_one = Vec::new();
    for engine in ["postgres", "mariadb"] {
        lesson_one.push(figure_rate(engine, bin, samples.figure_runs)?);
        tick();
    }
    Ok(Some(EngineFigures {
        mariadb,
        processes: races,
        explore,
        lesson_one,
        cluster: cluster(bin, samples.cluster, &tick),
    }))
}

/// `runs` whole races on a three-node cluster; `None` when none could run
/// (no Galera provider here), which the section then leaves out.
fn cluster(bin: Option<&std::path::Path>, runs: usize, tick: &impl Fn()) -> Option<ClusterProcess> {
    let mut took = Vec::new();
    for _ in 0..runs {
        took.push(
            idem_run(&["race", "--engine", "mariadb", "--nodes", "3"], bin)
                .ok()?
                .0,
        );
        tick();
    }
    let race = race_alone(&["--nodes", "3"], bin)?;
    let one_server = race_alone(&[], bin)?;
    tick();
    Some(ClusterProcess {
        runs,
        median_ms: median_ms(&mut took),
        races: RACES_TIMED,
        race_median_ms: race,
        one_server_race_median_ms: one_server,
        race_ratio: race / one_server,
    })
}

/// The median race alone (`elapsed_ms`: from the gate to the last answer)
/// of [`RACES_TIMED`] races on MariaDB, with `more` flags, in one process.
fn race_alone(more: &[&str], bin: Option<&std::path::Path>) -> Option<f64> {
    let runs = RACES_TIMED.to_string();
    let mut args = vec!["race", "--engine", "mariadb", "--json", "--runs", &runs];
    args.extend_from_slice(more);
    let (_, out) = idem_run(&args, bin).ok()?;
    let mut elapsed: Vec<Duration> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["elapsed_ms"].as_f64())
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .collect();
    (elapsed.len() == RACES_TIMED).then(|| median_ms(&mut elapsed))
}

fn starts(
    bins: &MariadbBinaries,
    bin: Option<&std::path::Path>,
    samples: &Samples,
    tick: &impl Fn(),
) -> Result<MariadbStarts> {
    let scratch = private_dir(&std::env::temp_dir(), "idem-bench")?;
    let measured = (|| -> Result<MariadbStarts> {
        let (mut cold, mut warm, mut stops) = (Vec::new(), Vec::new(), Vec::new());
        for sample in 0..samples.cold + samples.warm {
            // The cold ones each get an empty cache of their own.
            let cache = match sample < samples.cold {
                true => scratch.join(format!("cache-{sample}")),
                false => scratch.join("warm"),
            };
            let began = Instant::now();
            let server = MariadbServer::start(bin, Some(&cache))?;
            match server.made_template {
                true => cold.push(began.elapsed()),
                false => warm.push(began.elapsed()),
            }
            stops.push(server.stop()?);
            tick();
        }
        Ok(MariadbStarts {
            version: bins.version.clone(),
            cold_start_ms: median_ms(&mut cold),
            warm_start_ms: median_ms(&mut warm),
            stop_ms: median_ms(&mut stops),
            cold_samples: cold.len(),
            warm_samples: warm.len(),
        })
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    measured
}

/// `idem ARGS` as a user runs it: its wall time, and its stdout. Exit 1
/// is a verdict (`idem explore` of a guard that fails), not a failure.
fn idem_run(args: &[&str], bin: Option<&std::path::Path>) -> Result<(Duration, Vec<u8>)> {
    let idem = std::env::current_exe().context("could not find idem's own binary")?;
    let mut race = Command::new(idem);
    race.args(args);
    if let Some(bin) = bin {
        race.arg("--mariadb-bin").arg(bin);
    }
    let began = Instant::now();
    let out = race
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("could not run idem")?;
    let took = began.elapsed();
    if !matches!(out.status.code(), Some(0 | 1)) {
        bail!(
            "idem {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((took, out.stdout))
}

/// `idem COMMAND` on each engine in turn, `runs` pairs.
fn processes(
    command: &[&str],
    bin: Option<&std::path::Path>,
    runs: usize,
    tick: &impl Fn(),
) -> Result<EngineProcesses> {
    let (mut postgres, mut mariadb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        postgres.push(idem_run(command, bin)?.0);
        mariadb.push(idem_run(&[command, &["--engine", "mariadb"]].concat(), bin)?.0);
        tick();
    }
    let (p, m) = (median_ms(&mut postgres), median_ms(&mut mariadb));
    Ok(EngineProcesses {
        command: format!("idem {}", command.join(" ")),
        runs,
        postgres_median_ms: p,
        mariadb_median_ms: m,
        ratio: m / p,
    })
}

/// `runs` default races on `engine` in one process: how many gave 1 key
/// row and 4 XP rows.
fn figure_rate(
    engine: &'static str,
    bin: Option<&std::path::Path>,
    runs: usize,
) -> Result<FigureRate> {
    let n = runs.to_string();
    let (_, out) = idem_run(&["race", "--engine", engine, "--runs", &n, "--json"], bin)?;
    let mut hits = 0;
    let mut seen = 0;
    for line in String::from_utf8_lossy(&out).lines() {
        let r: serde_json::Value = serde_json::from_str(line)?;
        seen += 1;
        if r["key_rows"] == 1 && r["xp_rows"] == 4 {
            hits += 1;
        }
    }
    if seen != runs {
        bail!("idem race --engine {engine} --runs {runs} gave {seen} results");
    }
    Ok(FigureRate {
        engine,
        runs,
        hits,
        rate: hits as f64 / runs as f64,
    })
}
