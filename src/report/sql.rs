//! `--sql`: the statement each step sent, and for the course's two shapes the line of its Rails code.

use crate::race::{RaceResult, StepEvent};
use crate::store::StoreKind;

/// A statement on one line: its whitespace collapsed, and any control
/// character a guard file put in it written out (see [`crate::controls`]).
pub fn one_line(sql: &str) -> String {
    let line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::controls::escaped(&line).into_owned()
}

/// The line of the course's Rails code a step stands for: lesson 1's
/// check-then-store and lesson 2's claim-work-complete (claims in the table),
/// and not for a guard file, whose statements are its own.
pub fn rails_line(r: &RaceResult, e: &StepEvent) -> Option<&'static str> {
    if r.store != StoreKind::Table || r.strategy_file.is_some() {
        return None;
    }
    r.strategy.spec().rails_line(e.step, &e.note)
}
