//! Running a scenario and holding its figures up against its expectations.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use super::file::Scenario;
use crate::db::Database;
use crate::db::via::Via;
use crate::keys::{KeysResult, simulate};
use crate::limits::Origin;
use crate::race::engine::Engine;
use crate::race::mariadb::cluster::After;
use crate::race::mariadb::{self as on_mariadb, EngineResult, MariadbRace};
use crate::race::options::RaceInput;
use crate::race::stepper::Controller;
use crate::race::{Outcome, Race, RaceResult, histogram};

/// One expectation and what the run showed.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub what: String,
    pub expected: String,
    pub actual: String,
    pub ok: bool,
}

/// A scenario's checks.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub source: String,
    pub title: String,
    pub lesson: u8,
    pub checks: Vec<Check>,
    /// Why the scenario did not run, when what it needs is not on this
    /// machine (PgBouncer for `via = "pgbouncer"`); `null` when it ran.
    pub skipped: Option<String>,
    /// The races it ran, for whoever shows more than the checks (a lesson).
    #[serde(skip)]
    pub results: Vec<RaceResult>,
    /// The races it ran on another engine (MariaDB).
    #[serde(skip)]
    pub engine_results: Vec<EngineResult>,
    /// What an `[explore]` scenario's walk found.
    #[serde(skip)]
    pub explored: Option<crate::explore::Exploration>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

fn check(what: &str, expected: impl ToString, actual: impl ToString, ok: bool) -> Check {
    Check {
        what: what.to_string(),
        expected: expected.to_string(),
        actual: actual.to_string(),
        ok,
    }
}

/// Runs the scenario against `db` (or, on `engine = "mariadb"`, against
/// the disposable MariaDB beside it) and checks every expectation it states.
pub async fn run(db: &Database, scenario: &Scenario) -> Result<Verdict> {
    if scenario.engine == Engine::Mariadb {
        return on_another_engine(db, scenario).await;
    }
    let needs_pgbouncer = scenario.pooler.is_some()
        || scenario
            .race
            .as_ref()
            .is_some_and(|r| r.app.via == Some(Via::Pgbouncer));
    let needs_standby = scenario.race.as_ref().is_some_and(|r| r.standby.wanted());
    let front = match needs_pgbouncer {
        true => db.pgbouncer_front().map(Some),
        false => Ok(None),
    };
    // A standby is made of idem's own cluster only.
    let front = match (needs_standby, &db.backend) {
        (true, crate::db::Backend::Server { .. }) => Err(anyhow::anyhow!(
            "a hot standby is made of idem's own disposable cluster, never of your server"
        )),
        _ => front,
    };
    let explored = match &scenario.explore {
        Some(spec) => {
            let settings = crate::explore::settings(spec)?;
            let walking = crate::explore::Walking::steps("idem step");
            Some(crate::explore::explore(db, settings, &walking, |_| {}).await?)
        }
        None => None,
    };
    let (checks, results, skipped) = match (front, &explored) {
        (_, Some(found)) => (explore_checks(&scenario.expect, found), Vec::new(), None),
        (Err(why), None) => (Vec::new(), Vec::new(), Some(why.to_string())),
        (Ok(front), None) => {
            let (checks, results) = checked(db, scenario, front).await?;
            (checks, results, None)
        }
    };
    Ok(Verdict {
        source: scenario.source.clone(),
        title: scenario.title.clone(),
        lesson: scenario.lesson,
        checks,
        skipped,
        results,
        engine_results: Vec::new(),
        explored,
    })
}

/// A `[race]` scenario on MariaDB: its races, then its checks.
async fn on_another_engine(db: &Database, scenario: &Scenario) -> Result<Verdict> {
    let spec = scenario
        .race
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("{}: a MariaDB scenario is a [race]", scenario.source))?;
    let race = MariadbRace::from_input(spec, Origin::File)?;
    let runs = 1..=scenario.expect.runs.unwrap_or(1).max(1) as usize;
    let mut results = Vec::new();
    if race.cluster.kill_node.is_some() {
        // A killed node is gone for good, and the run's shared cluster
        // serves its other scenarios: each run has a cluster of its own.
        for run in runs {
            let cluster = db.mariadb_alone(race.cluster.nodes).await?;
            let result = on_mariadb::run(&cluster, &race, run).await;
            cluster.close().await?;
            results.push(result?);
        }
    } else {
        let mariadb = db.mariadb_on(race.cluster.nodes).await?;
        for run in runs {
            results.push(on_mariadb::run(mariadb, &race, run).await?);
        }
    }
    Ok(Verdict {
        source: scenario.source.clone(),
        title: scenario.title.clone(),
        lesson: scenario.lesson,
        checks: engine_checks(scenario, &results),
        skipped: None,
        results: Vec::new(),
        engine_results: results,
        explored: None,
    })
}

/// The figures an `[expect]` may state of an exploration.
fn explore_checks(e: &super::file::Expect, found: &crate::explore::Exploration) -> Vec<Check> {
    let total = found.total.unwrap_or(0);
    [
        ("interleavings", e.interleavings, total),
        ("held in", e.held, found.held),
        ("failing in", e.failing, found.failing),
    ]
    .into_iter()
    .filter_map(|(what, x, got)| x.map(|x| check(what, x, got, got == x && found.total.is_some())))
    .collect()
}

/// Runs the scenario's one section, and checks what it showed; `front` is
/// the PgBouncer a `[pooler]` scenario stands in front of the cluster.
async fn checked(
    db: &Database,
    scenario: &Scenario,
    front: Option<(std::path::PathBuf, &crate::db::Cluster)>,
) -> Result<(Vec<Check>, Vec<RaceResult>)> {
    let e = &scenario.expect;
    Ok(
        if let (Some(spec), Some((program, cluster))) = (&scenario.pooler, front) {
            let runs = e.runs.unwrap_or(1).max(1);
            let report = crate::pooler::run(&program, cluster, runs, Some(&spec.finding)).await?;
            (pooler_checks(e, &report), Vec::new())
        } else if let Some(spec) = &scenario.keys {
            let result = simulate(db, &spec.settings()).await?;
            (keys_checks(e, &result), Vec::new())
        } else if let Some(spec) = &scenario.race {
            let results = race_results(db, spec, e.runs).await?;
            (race_checks(scenario, &results), results)
        } else {
            (Vec::new(), Vec::new())
        },
    )
}

/// The figure an `[expect]` may state of a pooler finding: the runs in
/// which the client through PgBouncer saw other than the direct one.
fn pooler_checks(e: &super::file::Expect, report: &crate::pooler::PoolerReport) -> Vec<Check> {
    let runs = report.findings.first().map_or(0, |f| f.runs);
    let broken = report.findings.first().map_or(0, |f| f.broken_runs);
    e.broken_runs
        .map(|x| {
            check(
                "broken through PgBouncer",
                format!("in {x} of {runs}"),
                format!("in {broken} of {runs} runs"),
                broken == x,
            )
        })
        .into_iter()
        .collect()
}

/// The figures an `[expect]` may state of lesson 6's clients.
fn keys_checks(e: &super::file::Expect, result: &KeysResult) -> Vec<Check> {
    let keys_used = result.keys_used as u64;
    let expected_keys = e.keys_used.map(|n| n as u64);
    [
        ("XP rows", e.xp_rows, result.xp_rows),
        ("duplicates", e.duplicates, result.duplicates),
        ("keys used", expected_keys, keys_used),
        ("merged intents", e.merged_intents, result.merged_intents),
    ]
    .into_iter()
    .filter_map(|(what, x, got)| x.map(|x| check(what, x, got, got == x)))
    .collect()
}

/// The scenario's race, run as many times as it asks: step by step when it
/// gives a schedule.
async fn race_results(
    db: &Database,
    spec: &RaceInput,
    runs: Option<u64>,
) -> Result<Vec<RaceResult>> {
    let mut race = Race::prepare(db, spec.build(Origin::File)?).await?;
    let mut results = Vec::new();
    for run in 1..=runs.unwrap_or(1).max(1) as usize {
        race = race.again(run).await?;
        results.push(match race.settings.requests().schedule() {
            Some(schedule) => {
                race.run_stepped(async |c: &mut Controller| c.follow(schedule, |_, _| Ok(())).await)
                    .await?
            }
            None => race.run(run).await?,
        });
    }
    Ok(results)
}

/// A figure of a race, by the name its check shows.
type Figure<T> = fn(&T) -> u64;

/// A figure an `[expect]` may state: its name, the value the file gives,
/// how to read it off a race, and the least and the most share of runs
/// that must show it (none: every run).
type Stated<T> = (&'static str, Option<u64>, Figure<T>, Rate);

/// The figures an `[expect]` may state of a race on PostgreSQL, in the
/// order they are shown.
fn race_figures(e: &super::file::Expect) -> [Stated<RaceResult>; 5] {
    [
        ("key rows", e.key_rows, |r| r.key_rows, (None, None)),
        (
            "XP rows",
            e.xp_rows,
            |r| r.xp_rows,
            (e.min_rate, e.max_rate),
        ),
        ("duplicates", e.duplicates, |r| r.duplicates, (None, None)),
        (
            "wrong replays",
            e.wrong_replays,
            |r| r.wrong_replays,
            (None, None),
        ),
        (
            "service calls",
            e.service_calls,
            |r| r.service_calls,
            (e.service_calls_min_rate, e.service_calls_max_rate),
        ),
    ]
}

/// The same for a race on another engine (MariaDB).
fn engine_figures(e: &super::file::Expect) -> [Stated<EngineResult>; 3] {
    [
        ("key rows", e.key_rows, |r| r.key_rows, (None, None)),
        (
            "XP rows",
            e.xp_rows,
            |r| r.xp_rows,
            (e.min_rate, e.max_rate),
        ),
        (
            "service calls",
            e.service_calls,
            |r| r.service_calls,
            (e.service_calls_min_rate, e.service_calls_max_rate),
        ),
    ]
}

/// The least and the most share of runs a figure must be seen in.
type Rate = (Option<f64>, Option<f64>);

/// The runs' figure: the one value when one race ran, else its distribution.
fn shown<T>(results: &[T], figure: Figure<T>) -> String {
    let mut h = BTreeMap::new();
    for r in results {
        *h.entry(figure(r)).or_insert(0u64) += 1;
    }
    match (results.len(), h.keys().next()) {
        (1, Some(only)) => only.to_string(),
        _ => histogram(&h),
    }
}

/// " in all N runs", or nothing for one.
fn in_all<T>(results: &[T]) -> String {
    match results.len() {
        1 => String::new(),
        n => format!(" in all {n} runs"),
    }
}

/// Each stated figure against the runs: on every run, or at its rate.
fn figure_checks<T>(results: &[T], figures: impl IntoIterator<Item = Stated<T>>) -> Vec<Check> {
    figures
        .into_iter()
        .filter_map(|(what, x, figure, rate)| {
            x.map(|x| match rate {
                (None, None) => check(
                    what,
                    format!("{x}{}", in_all(results)),
                    shown(results, figure),
                    results.iter().all(|r| figure(r) == x),
                ),
                rate => rate_check(what, results, figure, x, rate),
            })
        })
        .collect()
}

fn race_checks(scenario: &Scenario, results: &[RaceResult]) -> Vec<Check> {
    let e = &scenario.expect;
    let mut checks = figure_checks(results, race_figures(e));
    if let Some(expected) = &e.outcomes {
        checks.push(outcomes_check(results, expected, |r, o| r.count(o)));
    }
    if let Some(lost) = e.acknowledged_key_lost {
        checks.push(failover_check(results, lost));
    }
    checks
}

/// A race on another engine: its figures, its outcomes, and the server
/// errors every run met, by number.
fn engine_checks(scenario: &Scenario, results: &[EngineResult]) -> Vec<Check> {
    let e = &scenario.expect;
    let mut checks = figure_checks(results, engine_figures(e));
    if let Some(expected) = &e.outcomes {
        let count =
            |r: &EngineResult, o: Outcome| r.outcomes.get(o.name()).map_or(0, |n| *n as u64);
        checks.push(outcomes_check(results, expected, count));
    }
    if let Some(expected) = &e.server_errors {
        checks.push(server_errors_check(results, expected));
    }
    if let Some(expected) = &e.cluster_after {
        let seen: Vec<_> = results.iter().map(|r| r.cluster_after.as_ref()).collect();
        checks.push(cluster_after_check(&seen, expected));
    }
    checks
}

/// Every run left the cluster as the file says (`seen`, a run's each): its
/// size and status as node 1 sees them. A run with no cluster shows "no
/// cluster".
fn cluster_after_check(seen: &[Option<&After>], expected: &After) -> Check {
    let show = |a: Option<&After>| match a {
        Some(a) => format!("{} nodes, {}", a.size, a.status),
        None => "no cluster".to_string(),
    };
    let differing = seen.iter().find(|a| **a != Some(expected));
    let shown = differing.or(seen.first()).copied().flatten();
    check(
        "cluster after",
        format!("{}{}", show(Some(expected)), in_all(seen)),
        show(shown),
        differing.is_none() && !seen.is_empty(),
    )
}

/// Every run met each of the server errors the file names, by number, and
/// no other.
fn server_errors_check(results: &[EngineResult], expected: &[u16]) -> Check {
    let numbers = |r: &EngineResult| -> std::collections::BTreeSet<u16> {
        r.reports
            .iter()
            .filter_map(|w| w.error.as_ref().map(|e| e.number))
            .collect()
    };
    let want: std::collections::BTreeSet<u16> = expected.iter().copied().collect();
    let show = |s: &std::collections::BTreeSet<u16>| match s.is_empty() {
        true => "none".to_string(),
        false => s.iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
    };
    let differing = results.iter().map(numbers).find(|n| *n != want);
    let seen = differing
        .clone()
        .unwrap_or_else(|| results.first().map(numbers).unwrap_or_default());
    check(
        "server errors",
        format!("{}{}", show(&want), in_all(results)),
        show(&seen),
        differing.is_none() && !results.is_empty(),
    )
}

/// Lesson 10: whether every run's failover lost the acknowledged key. A
/// run that did not fail over shows "no failover", and fails the check.
fn failover_check(results: &[RaceResult], lost: bool) -> Check {
    let said = |lost: bool| match lost {
        true => "lost",
        false => "kept",
    };
    let seen: Vec<Option<bool>> = results
        .iter()
        .map(|r| r.failover.as_ref().map(|f| f.acknowledged_key_lost))
        .collect();
    let mut shown: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &seen {
        *shown.entry(s.map_or("no failover", said)).or_default() += 1;
    }
    check(
        "acknowledged key",
        format!("{}{}", said(lost), in_all(results)),
        shown
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", "),
        seen.iter().all(|s| *s == Some(lost)),
    )
}

/// A probabilistic figure: the share of runs whose `figure` is `x`, at
/// least `min` or at most `max` (`max` wins if both are given).
fn rate_check<T>(what: &str, results: &[T], figure: Figure<T>, x: u64, (min, max): Rate) -> Check {
    let n = results.len();
    let hits = results.iter().filter(|r| figure(r) == x).count();
    let share = hits as f64 / n as f64;
    let (bound, rate, ok) = match (min, max) {
        (_, Some(rate)) => ("at most", rate, share <= rate),
        (Some(rate), None) => ("at least", rate, share >= rate),
        (None, None) => ("at least", 1.0, share >= 1.0),
    };
    check(
        what,
        format!("{x} in {bound} {:.0}% of the runs", rate * 100.0),
        format!("{}: {x} in {hits} of {n} runs", shown(results, figure)),
        ok,
    )
}

/// Every run's count of each outcome the file names, against the file's.
fn outcomes_check<T>(
    results: &[T],
    expected: &BTreeMap<String, u64>,
    count: fn(&T, Outcome) -> u64,
) -> Check {
    let show = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let actual = |r: &T| -> BTreeMap<String, u64> {
        expected
            .keys()
            .map(|k| (k.clone(), Outcome::from_name(k).map_or(0, |o| count(r, o))))
            .collect()
    };
    let differing = results.iter().map(actual).find(|a| a != expected);
    let seen = differing.clone().unwrap_or_else(|| actual(&results[0]));
    check(
        "outcomes",
        format!("{}{}", show(expected), in_all(results)),
        show(&seen),
        differing.is_none(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(size: u64, status: &str) -> After {
        After {
            size,
            status: status.to_string(),
        }
    }

    #[test]
    fn a_cluster_left_otherwise_in_any_run_fails_its_check() {
        let (two, three) = (after(2, "Primary"), after(3, "Primary"));
        let held = cluster_after_check(&[Some(&two), Some(&two)], &two);
        assert!(held.ok, "{held:?}");
        assert_eq!(held.expected, "2 nodes, Primary in all 2 runs");
        let one_differs = cluster_after_check(&[Some(&two), Some(&three)], &two);
        assert!(!one_differs.ok);
        assert_eq!(one_differs.actual, "3 nodes, Primary");
        let split = cluster_after_check(&[Some(&after(2, "non-Primary"))], &two);
        assert!(!split.ok && split.actual == "2 nodes, non-Primary");
        let none = cluster_after_check(&[None], &two);
        assert!(!none.ok && none.actual == "no cluster");
        assert!(!cluster_after_check(&[], &two).ok, "no run holds nothing");
    }
}
