//! `--trace`: every worker's steps in lanes on one axis, then the same steps in order (with `--sql`, what each sent).

use std::fmt::Write;

use super::sql::{one_line, rails_line};
use super::style::dim;
use crate::race::{RaceResult, StepEvent};
use crate::strategy::Step;

/// The widest the lanes get.
const MAX_LANE: usize = 60;

/// What the axis of the lanes measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Axis {
    /// Milliseconds from the start gate.
    #[default]
    Time,
    /// The order in which steps started and ended, one column each: for a
    /// race driven by hand, where the time is mostly a person thinking.
    StepOrder,
}

/// What a timeline shows besides the lanes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    pub axis: Axis,
    /// Each step's statement, and the Rails line it stands for.
    pub sql: bool,
}

/// Draws the lanes and the ordered step log.
pub fn render_with(r: &RaceResult, shown: Shown) -> String {
    let place = placer(r, shown.axis);
    let end = r
        .reports
        .iter()
        .flat_map(|w| w.steps.iter().map(|e| place(e.end_ms)))
        .fold(0.0_f64, f64::max)
        .max(0.001);
    // The lanes take what the screen leaves beside "  worker N │" and the outcome.
    let lane_w = super::width::width()
        .saturating_sub(12 + 2 + 16 + 8)
        .clamp(20, MAX_LANE);
    let col = |at: f64| ((at / end) * (lane_w - 1) as f64).round() as usize;

    let mut out = String::new();
    let legend = legend(r);
    let axis = match shown.axis {
        Axis::Time => "timeline, ms from the start gate",
        Axis::StepOrder => "timeline in step order, the pauses left out",
    };
    let _ = writeln!(out, "{}", dim(format!("{axis} ({})", legend.join(", "))));
    match shown.axis {
        Axis::Time => {
            let _ = writeln!(out, "{:>10} {:<w$}{:.1}", "0", "", end, w = lane_w - 1);
        }
        Axis::StepOrder => {
            let _ = writeln!(out, "{:>10} {:<w$}last", "first", "", w = lane_w - 4);
        }
    }
    for w in &r.reports {
        let mut lane = vec![' '; lane_w];
        for e in &w.steps {
            let (a, b) = (col(place(e.start_ms)), col(place(e.end_ms)));
            for cell in lane.iter_mut().take(b.max(a) + 1).skip(a) {
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

    step_log(&mut out, r, shown);
    out
}

/// The legend: a letter and a name for each step some worker took.
fn legend(r: &RaceResult) -> Vec<String> {
    let used = Step::ALL.into_iter().filter(|s| {
        r.reports
            .iter()
            .any(|w| w.steps.iter().any(|e| e.step == *s))
    });
    used.map(|s| format!("{} {}", s.letter(), s.name()))
        .collect()
}

/// Every step of every worker in the order they ended, with its statement
/// and Rails line when asked.
fn step_log(out: &mut String, r: &RaceResult, shown: Shown) {
    let _ = writeln!(out, "\n{}", dim("the same steps in the order they ended"));
    let mut steps: Vec<(usize, &StepEvent)> = r
        .reports
        .iter()
        .flat_map(|w| w.steps.iter().map(move |e| (w.worker, e)))
        .collect();
    steps.sort_by(|a, b| a.1.end_ms.total_cmp(&b.1.end_ms));
    for (n, (worker, e)) in steps.into_iter().enumerate() {
        let when = match shown.axis {
            Axis::Time => format!("{:>8.2} ms", e.end_ms),
            Axis::StepOrder => format!("{:>8}.", n + 1),
        };
        let _ = writeln!(
            out,
            "  {when}  worker {:<2} {:<9} {}",
            worker,
            e.step.name(),
            dim(&e.note)
        );
        if shown.sql {
            let indent = " ".repeat(15);
            if let Some(sql) = e.sql {
                let _ = writeln!(out, "{indent}{}", dim(format!("sql   {}", one_line(sql))));
            }
            if let Some(rails) = rails_line(r, e) {
                let _ = writeln!(out, "{indent}{}", dim(format!("rails {rails}")));
            }
        }
    }
}

/// Where a moment falls on the axis: itself, or its rank among every step's
/// start and end (each boundary one column, so every step shows).
fn placer(r: &RaceResult, axis: Axis) -> impl Fn(f64) -> f64 {
    let mut bounds: Vec<f64> = r
        .reports
        .iter()
        .flat_map(|w| w.steps.iter().flat_map(|e| [e.start_ms, e.end_ms]))
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    move |at: f64| match axis {
        Axis::Time => at,
        Axis::StepOrder => bounds.partition_point(|b| *b < at) as f64,
    }
}
