//! Predict, then observe: before a lesson shows a figure, the learner says what it will be in one key, and sees the answer beside the race's.

use anyhow::Result;

use super::keyboard::{Key, Keyboard};
use crate::lesson::{Figure, Prediction};
use crate::race::{Outcome, RaceResult};
use crate::report::emit;
use crate::report::style::{bad, dim, good, strong};
use crate::scenario::Verdict;

/// Asks `p`'s question; the learner's answer, or `None` if they skipped it
/// (Enter, `s`, or the end of input). Ctrl-C stops idem as anywhere else.
pub async fn ask(p: &Prediction, keys: &mut Keyboard) -> Result<Option<u64>> {
    emit(&format!(
        "{}\n{} ",
        strong(format!("Predict: {}", p.question)),
        dim(format!(
            "press 0-{} ({} skips){}:",
            p.most,
            "Enter or s",
            keys.enter_hint()
        ))
    ))?;
    loop {
        let key = keys.any().await?;
        match key {
            Key::Char(c)
                if c.is_ascii_digit() && c.to_digit(10).unwrap_or(99) <= u32::from(p.most) =>
            {
                emit(&format!("{c}\n\n"))?;
                return Ok(c.to_digit(10).map(u64::from));
            }
            Key::Char('\n' | 's') | Key::End => {
                emit("(skipped)\n\n")?;
                return Ok(None);
            }
            Key::Char(_) => {}
        }
    }
}

/// The figure of each run the scenario ran; for a scenario that is not a
/// race (lesson 6's clients), the figure its checks counted.
pub fn figures(figure: Figure, verdict: &Verdict) -> Vec<u64> {
    if !verdict.engine_results.is_empty() {
        return verdict
            .engine_results
            .iter()
            .filter_map(|r| match figure {
                Figure::XpRows => Some(r.xp_rows),
                Figure::ServiceCalls => Some(r.service_calls),
                Figure::Conflicts => Some(r.outcomes.get("conflict").map_or(0, |n| *n as u64)),
                Figure::WrongReplays => None,
            })
            .collect();
    }
    if verdict.results.is_empty() {
        let named = match figure {
            Figure::XpRows => "XP rows",
            Figure::ServiceCalls => "service calls",
            Figure::Conflicts | Figure::WrongReplays => return Vec::new(),
        };
        return verdict
            .checks
            .iter()
            .filter(|c| c.what == named)
            .filter_map(|c| c.actual.parse().ok())
            .collect();
    }
    verdict.results.iter().map(|r| of(figure, r)).collect()
}

fn of(figure: Figure, r: &RaceResult) -> u64 {
    match figure {
        Figure::XpRows => r.xp_rows,
        Figure::ServiceCalls => r.service_calls,
        Figure::Conflicts => r.count(Outcome::Conflict),
        Figure::WrongReplays => r.wrong_replays,
    }
}

/// The figure most runs gave (the smaller on a tie), and in how many.
pub fn most_seen(seen: &[u64]) -> Option<(u64, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for n in seen {
        *counts.entry(*n).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(n, c)| (*c, std::cmp::Reverse(*n)))
}

/// The learner's answer beside the figure, and why it is what it is. The
/// figure is the one most runs gave.
pub fn told(p: &Prediction, guess: u64, seen: &[u64]) -> Option<String> {
    let (figure, runs) = most_seen(seen)?;
    let many = match seen.len() {
        1 => String::new(),
        all => format!(" (in {runs} of {all} runs)"),
    };
    let line = match guess == figure {
        true => good(format!(
            "You said {guess}: right, {figure} {}{many}.",
            p.figure.name(figure)
        )),
        false => bad(format!(
            "You said {guess}; the race made {figure} {}{many}.",
            p.figure.name(figure)
        )),
    };
    Some(format!("{line} {}\n", p.why))
}
