//! Hermitage's name for what a cell's transactions did, read off its runs: G2, an anti-dependency cycle.
//!
//! Hermitage tests each isolation level against Adya's anomalies. The one
//! a guard that reads before it writes can meet is G2: two transactions
//! each read that no row matches (here: no row has the key), then each
//! writes a row the other's read would have matched. Whether a level lets
//! it through is Hermitage's question; what a race shows is whether it
//! happened (two requests read no key, then both wrote) and what ended it:
//! the key's unique index, a deadlock the server broke, or nothing.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::race::mariadb::{EngineResult, EngineWorker};
use crate::request::{Outcome, Step};

/// What a cell's runs showed of G2.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct G2 {
    /// Runs in which some request read the key before it wrote.
    pub runs_that_read: u64,
    /// Runs in which two or more requests read no key, then wrote it.
    pub runs_shown: u64,
    /// How each of those requests but the one whose write stood ended:
    /// by a server error (`1062`, `1213`), or `committed`.
    pub ended: BTreeMap<String, u64>,
}

impl G2 {
    /// Adds one run on MariaDB.
    pub fn add(&mut self, r: &EngineResult) {
        let read = |w: &&EngineWorker| w.steps.iter().any(|e| e.step == Step::Find);
        if r.reports.iter().any(|w| read(&w)) {
            self.runs_that_read += 1;
        }
        let wrote_after_no_key = |w: &&EngineWorker| {
            w.steps
                .iter()
                .any(|e| e.step == Step::Find && e.note == "no key")
                && w.steps.iter().any(|e| e.step == Step::Store)
        };
        let cycle: Vec<&EngineWorker> = r.reports.iter().filter(wrote_after_no_key).collect();
        if cycle.len() < 2 {
            return;
        }
        self.runs_shown += 1;
        let mut stood = false;
        for w in cycle {
            let ended = match (&w.error, w.outcome) {
                (Some(e), _) => e.number.to_string(),
                (None, Outcome::Created) if !stood => {
                    stood = true;
                    continue;
                }
                (None, _) => "committed".to_string(),
            };
            *self.ended.entry(ended).or_default() += 1;
        }
    }

    /// "G2 in 20 of 20 runs; ended by 1062 ×3 (the unique key)", or why
    /// there was none.
    pub fn told(&self, runs: u64) -> String {
        if self.runs_that_read == 0 {
            return "no read before the write: no G2 to show".into();
        }
        if self.runs_shown == 0 {
            return "no G2: never two requests read no key and wrote".into();
        }
        let per_run = |n: u64| n as f64 / self.runs_shown as f64;
        let mut ended: Vec<(&String, &u64)> = self.ended.iter().collect();
        ended.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut told = format!("G2 in {} of {runs} runs", self.runs_shown);
        let (stood, errors): (Vec<_>, Vec<_>) =
            ended.iter().partition(|(how, _)| *how == "committed");
        if !errors.is_empty() {
            let errors = errors
                .iter()
                .map(|(how, n)| format!("{how} ×{:.0} ({})", per_run(**n), meaning(how)))
                .collect::<Vec<_>>()
                .join(", ");
            told.push_str(&format!("; the others ended by {errors}"));
        }
        if let Some((_, n)) = stood.first() {
            told.push_str(&format!("; ×{:.0} committed too: it stood", per_run(**n)));
        }
        told
    }
}

/// What ended a transaction in the cycle, in a few words.
fn meaning(how: &str) -> &'static str {
    match how {
        "1062" => "the unique key",
        "1213" => "a deadlock",
        "1205" => "a lock wait given up",
        _ => "a server error",
    }
}
