//! Verdicts, one row per case, PASS, FAIL or n/a: the challenge's, and the probe's conformance checks.

use super::style::{bad, dim, good, strong};
use crate::probe::conformance::{Check, Mark};

/// The in-process challenge's verdicts.
pub fn render(name: &str, cases: &[Check]) -> String {
    render_checks(&format!("idem challenge · {name}"), cases)
}

/// Checks made over HTTP (the challenge with --url, probe --conformance).
pub fn render_checks(title: &str, checks: &[Check]) -> String {
    let rows = checks
        .iter()
        .map(|c| (c.case, c.demands, c.saw.as_str(), c.mark))
        .collect();
    verdicts(title, rows)
}

/// The table, with a last line counting the passes.
fn verdicts(title: &str, rows: Vec<(&str, &str, &str, Mark)>) -> String {
    let passed = rows.iter().filter(|r| r.3 == Mark::Pass).count();
    let judged = rows.iter().filter(|r| r.3 != Mark::NotApplicable).count();
    let total = rows.len();
    let table = rows
        .into_iter()
        .map(|(case, demands, saw, mark)| {
            let mark = match mark {
                Mark::Pass => good(mark.name()).to_string(),
                Mark::Fail => bad(mark.name()).to_string(),
                Mark::NotApplicable => dim(mark.name()).to_string(),
            };
            vec![case.to_string(), demands.to_string(), saw.to_string(), mark]
        })
        .collect();
    let unjudged = match total - judged {
        0 => String::new(),
        n => format!("; {n} n/a, not judged"),
    };
    format!(
        "{}\n\n{}\n\n{passed} of {judged} cases hold{unjudged}\n",
        strong(title),
        super::table::render(&["case", "demands", "saw", ""], table, &[]),
    )
}
