//! The challenge's verdicts: one row per case, PASS or FAIL.

use super::style::{bad, good, strong};
use crate::challenge::CaseResult;

/// The verdicts as a table, with a last line counting the passes.
pub fn render(name: &str, cases: &[CaseResult]) -> String {
    let rows = cases
        .iter()
        .map(|c| {
            vec![
                c.case.to_string(),
                c.demands.to_string(),
                c.saw.clone(),
                if c.passed {
                    good("PASS").to_string()
                } else {
                    bad("FAIL").to_string()
                },
            ]
        })
        .collect();
    let passed = cases.iter().filter(|c| c.passed).count();
    format!(
        "{}\n\n{}\n\n{passed} of {} cases hold\n",
        strong(format!("idem challenge · {name}")),
        super::table::render(&["case", "demands", "saw", ""], rows, &[]),
        cases.len()
    )
}
