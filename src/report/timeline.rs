//! `--trace`: every worker's steps in lanes on one time axis, then the same steps in order.

use std::fmt::Write;

use super::style::dim;
use crate::race::RaceResult;
use crate::strategy::Step;

/// Columns the time axis spans.
const WIDTH: usize = 60;

/// Draws the lanes and the ordered step log.
pub fn render(r: &RaceResult) -> String {
    let end = r
        .reports
        .iter()
        .flat_map(|w| w.steps.iter().map(|e| e.end_ms))
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let col = |ms: f64| ((ms / end) * (WIDTH - 1) as f64).round() as usize;

    let mut out = String::new();
    let used: Vec<Step> = [
        Step::Checkout,
        Step::Find,
        Step::Claim,
        Step::Read,
        Step::Work,
        Step::Store,
        Step::Complete,
        Step::Wait,
        Step::Fault,
    ]
    .into_iter()
    .filter(|s| {
        r.reports
            .iter()
            .any(|w| w.steps.iter().any(|e| e.step == *s))
    })
    .collect();
    let legend: Vec<String> = used
        .iter()
        .map(|s| format!("{} {}", s.letter(), s.name()))
        .collect();
    let _ = writeln!(
        out,
        "{}",
        dim(format!(
            "timeline, ms from the start gate ({})",
            legend.join(", ")
        ))
    );
    let _ = writeln!(out, "{:>10} {:<w$}{:.1}", "0", "", end, w = WIDTH - 1);
    for w in &r.reports {
        let mut lane = vec![' '; WIDTH];
        for e in &w.steps {
            let (a, b) = (col(e.start_ms), col(e.end_ms).max(col(e.start_ms)));
            for cell in lane.iter_mut().take(b + 1).skip(a) {
                *cell = e.step.letter();
            }
        }
        let lane: String = lane.into_iter().collect();
        let retry = if w.retry { " (retry)" } else { "" };
        let _ = writeln!(
            out,
            "  worker {:<2}│{lane}│ {}{retry}",
            w.worker,
            w.outcome.name()
        );
    }

    let _ = writeln!(out, "\n{}", dim("the same steps in the order they ended"));
    let mut steps: Vec<(usize, &crate::race::StepEvent)> = r
        .reports
        .iter()
        .flat_map(|w| w.steps.iter().map(move |e| (w.worker, e)))
        .collect();
    steps.sort_by(|a, b| a.1.end_ms.total_cmp(&b.1.end_ms));
    for (worker, e) in steps {
        let _ = writeln!(
            out,
            "  {:>8.2} ms  worker {:<2} {:<9} {}",
            e.end_ms,
            worker,
            e.step.name(),
            dim(&e.note)
        );
    }
    out
}
