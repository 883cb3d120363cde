//! Running a scenario and holding its figures up against its expectations.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use super::file::Scenario;
use crate::db::Database;
use crate::keys::simulate;
use crate::limits::Origin;
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
    /// The races it ran, for whoever shows more than the checks (a lesson).
    #[serde(skip)]
    pub results: Vec<RaceResult>,
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

/// Runs the scenario against `db` and checks every expectation it states.
pub async fn run(db: &Database, scenario: &Scenario) -> Result<Verdict> {
    let e = &scenario.expect;
    let mut checks = Vec::new();
    let mut ran = Vec::new();
    if let Some(spec) = &scenario.keys {
        let result = simulate(db, &spec.settings()).await?;
        if let Some(x) = e.xp_rows {
            checks.push(check("XP rows", x, result.xp_rows, result.xp_rows == x));
        }
        if let Some(x) = e.duplicates {
            checks.push(check(
                "duplicates",
                x,
                result.duplicates,
                result.duplicates == x,
            ));
        }
        if let Some(x) = e.keys_used {
            checks.push(check(
                "keys used",
                x,
                result.keys_used,
                result.keys_used == x,
            ));
        }
        if let Some(x) = e.merged_intents {
            checks.push(check(
                "merged intents",
                x,
                result.merged_intents,
                result.merged_intents == x,
            ));
        }
    } else if let Some(spec) = &scenario.race {
        let race = Race::prepare(db, spec.build(Origin::File)?).await?;
        let runs = e.runs.unwrap_or(1).max(1);
        let mut results: Vec<RaceResult> = Vec::new();
        for run in 1..=runs as usize {
            let result = match race.settings.schedule() {
                Some(schedule) => {
                    race.run_stepped(async |c: &mut Controller| {
                        c.follow(schedule, |_, _| Ok(())).await
                    })
                    .await?
                }
                None => race.run(run).await?,
            };
            results.push(result);
        }
        checks.extend(race_checks(scenario, &results));
        ran = results;
    }
    Ok(Verdict {
        source: scenario.source.clone(),
        title: scenario.title.clone(),
        lesson: scenario.lesson,
        checks,
        results: ran,
    })
}

fn race_checks(scenario: &Scenario, results: &[RaceResult]) -> Vec<Check> {
    let e = &scenario.expect;
    let n = results.len();
    let mut checks = Vec::new();
    let counts = |f: fn(&RaceResult) -> u64| {
        let mut h = BTreeMap::new();
        for r in results {
            *h.entry(f(r)).or_insert(0u64) += 1;
        }
        h
    };
    let all = |f: fn(&RaceResult) -> u64, x: u64| results.iter().all(|r| f(r) == x);
    // One run shows its figure; many show their distribution.
    let histogram = |h: &BTreeMap<u64, u64>| match (n, h.keys().next()) {
        (1, Some(only)) => only.to_string(),
        _ => histogram(h),
    };
    let runs = if n == 1 {
        String::new()
    } else {
        format!(" in all {n} runs")
    };
    if let Some(x) = e.key_rows {
        let got = histogram(&counts(|r| r.key_rows));
        checks.push(check(
            "key rows",
            format!("{x}{runs}"),
            got,
            all(|r| r.key_rows, x),
        ));
    }
    if let Some(x) = e.xp_rows {
        let got = histogram(&counts(|r| r.xp_rows));
        match (e.min_rate, e.max_rate) {
            (_, Some(rate)) => {
                let hits = results.iter().filter(|r| r.xp_rows == x).count();
                let share = hits as f64 / n as f64;
                checks.push(check(
                    "XP rows",
                    format!("{x} in at most {:.0}% of {n} runs", rate * 100.0),
                    format!("{got} ({:.1}%)", share * 100.0),
                    share <= rate,
                ));
            }
            (Some(rate), None) => {
                let hits = results.iter().filter(|r| r.xp_rows == x).count();
                let share = hits as f64 / n as f64;
                checks.push(check(
                    "XP rows",
                    format!("{x} in at least {:.0}% of {n} runs", rate * 100.0),
                    format!("{got} ({:.1}%)", share * 100.0),
                    share >= rate,
                ));
            }
            (None, None) => checks.push(check(
                "XP rows",
                format!("{x}{runs}"),
                got,
                all(|r| r.xp_rows, x),
            )),
        }
    }
    if let Some(x) = e.duplicates {
        let got = histogram(&counts(|r| r.duplicates));
        checks.push(check(
            "duplicates",
            format!("{x}{runs}"),
            got,
            all(|r| r.duplicates, x),
        ));
    }
    if let Some(x) = e.wrong_replays {
        let got = histogram(&counts(|r| r.wrong_replays));
        checks.push(check(
            "wrong replays",
            format!("{x}{runs}"),
            got,
            all(|r| r.wrong_replays, x),
        ));
    }
    if let Some(expected) = &e.outcomes {
        let show = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let actual = |r: &RaceResult| -> BTreeMap<String, u64> {
            expected
                .keys()
                .map(|k| (k.clone(), Outcome::from_name(k).map_or(0, |o| r.count(o))))
                .collect()
        };
        let differing = results.iter().map(actual).find(|a| a != expected);
        let shown = differing.clone().unwrap_or_else(|| actual(&results[0]));
        checks.push(check(
            "outcomes",
            format!("{}{runs}", show(expected)),
            show(&shown),
            differing.is_none(),
        ));
    }
    checks
}
