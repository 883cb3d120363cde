//! `idem compare --losers`: fail-fast, poll and block side by side, with what each costs.

use std::fmt::Write;

use serde::Serialize;

use super::style::{bad, dim, good, strong};
use super::table;
use crate::race::{Outcome, RaceResult, percentile};

/// One loser policy's figures over its races.
#[derive(Debug, Clone, Serialize)]
pub struct LoserRow {
    pub policy: String,
    pub races: usize,
    /// Median time for the winner to answer, ms.
    pub winner_p50_ms: f64,
    /// Median and slowest time for a loser to answer, ms.
    pub losers_p50_ms: f64,
    pub losers_max_ms: f64,
    pub created: u64,
    pub replayed: u64,
    pub conflict: u64,
    pub checkout_timeouts: u64,
    /// Statements sent per race, on average.
    pub queries_per_race: f64,
    /// Seconds of pooled connection held by losers while they waited, per race.
    pub connection_s_waiting: f64,
    pub duplicates: u64,
}

impl LoserRow {
    pub fn from_races(policy: &str, races: &[RaceResult]) -> Self {
        let mut winners = Vec::new();
        let mut losers = Vec::new();
        let (mut queries, mut held_ms) = (0u64, 0.0);
        for race in races {
            for w in &race.reports {
                queries += u64::from(w.queries);
                match w.outcome {
                    Outcome::Created => winners.push(w.answer_ms),
                    Outcome::Replayed | Outcome::Conflict => losers.push(w.answer_ms),
                    _ => {}
                }
                if let Some(waited) = w.waited.filter(|w| w.held_connection) {
                    held_ms += waited.ms;
                }
            }
        }
        let n = races.len().max(1) as f64;
        let total = |outcome: Outcome| races.iter().map(|r| r.count(outcome)).sum::<u64>();
        Self {
            policy: policy.to_string(),
            races: races.len(),
            winner_p50_ms: percentile(&mut winners, 0.5),
            losers_p50_ms: percentile(&mut losers, 0.5),
            losers_max_ms: percentile(&mut losers, 1.0),
            created: total(Outcome::Created),
            replayed: total(Outcome::Replayed),
            conflict: total(Outcome::Conflict),
            checkout_timeouts: total(Outcome::CheckoutTimeout),
            queries_per_race: queries as f64 / n,
            connection_s_waiting: held_ms / 1000.0 / n,
            duplicates: races.iter().map(|r| r.duplicates).sum(),
        }
    }
}

pub fn render(rows: &[LoserRow], settings_line: &str) -> String {
    let mut out = String::new();
    let races = rows.first().map_or(1, |r| r.races);
    let runs = if races == 1 {
        String::new()
    } else {
        format!(" · {races} runs each")
    };
    let _ = writeln!(
        out,
        "{}{}",
        strong("idem compare --losers · claim-work-complete"),
        strong(runs)
    );
    let _ = writeln!(out, "{}\n", dim(settings_line));
    let body = rows
        .iter()
        .map(|r| {
            let dup = if r.duplicates == 0 {
                good("0")
            } else {
                bad(r.duplicates.to_string())
            };
            let timeouts = if r.checkout_timeouts == 0 {
                "0".to_string()
            } else {
                bad(r.checkout_timeouts.to_string()).to_string()
            };
            vec![
                r.policy.clone(),
                format!("{:.1} ms", r.winner_p50_ms),
                format!("{:.1} ms", r.losers_p50_ms),
                format!("{:.1} ms", r.losers_max_ms),
                format!("{} / {} / {}", r.created, r.replayed, r.conflict),
                format!("{:.1}", r.queries_per_race),
                format!("{:.3}", r.connection_s_waiting),
                timeouts,
                dup.to_string(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "loser",
            "winner p50",
            "losers p50",
            "losers max",
            "created / replayed / 409",
            "queries/race",
            "conn-s waiting",
            "timeouts",
            "duplicates",
        ],
        body,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    ));
    out.push('\n');
    let _ = writeln!(
        out,
        "\n{}",
        dim(
            "fail-fast frees the connection at once and leaves the retry to the client; poll answers in one \
             request at the price of reads; block is the simplest code but holds a connection per waiting loser."
        )
    );
    out
}
