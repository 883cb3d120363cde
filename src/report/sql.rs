//! `--sql`: the statement each step sent, and for the course's two shapes the line of its Rails code.

use crate::race::{RaceResult, StepEvent};
use crate::store::StoreKind;
use crate::strategy::{Step, StrategyKind};

/// A statement on one line: its whitespace collapsed.
pub fn one_line(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The line of the course's Rails code a step stands for: lesson 1's
/// check-then-store and lesson 2's claim-work-complete (claims in the table).
pub fn rails_line(r: &RaceResult, e: &StepEvent) -> Option<&'static str> {
    if r.store != StoreKind::Table {
        return None;
    }
    match (r.strategy, e.step) {
        (StrategyKind::CheckThenStore, Step::Find) if e.note.starts_with("key found") => Some(
            "return existing_result if IdempotencyKey.find_by(key: idempotency_key, operation: \"award_xp\")",
        ),
        (StrategyKind::CheckThenStore, Step::Find) => Some(
            "existing = IdempotencyKey.find_by(key: idempotency_key, operation: \"award_xp\")  # nil",
        ),
        (StrategyKind::CheckThenStore | StrategyKind::ClaimWorkComplete, Step::Work) => {
            Some("xp = ExperiencePoint.create!(user:, amount:)  # the work")
        }
        (StrategyKind::CheckThenStore, Step::Store) if e.note.contains("lost") => Some(
            "IdempotencyKey.create!(...) rescue ActiveRecord::RecordNotUnique  # the XP row stays",
        ),
        (StrategyKind::CheckThenStore, Step::Store) => Some(
            "IdempotencyKey.create!(key: idempotency_key, operation: \"award_xp\", response_body: { id: xp.id })",
        ),
        (StrategyKind::ClaimWorkComplete, Step::Claim) => Some(
            "claim = IdempotencyKey.insert({ key:, operation: \"award_xp\", status: \"pending\" }, unique_by: :key, returning: :id)",
        ),
        (StrategyKind::ClaimWorkComplete, Step::Read) => {
            Some("existing = IdempotencyKey.find_by(key: idempotency_key)  # someone else's claim")
        }
        (StrategyKind::ClaimWorkComplete, Step::Complete) => Some(
            "IdempotencyKey.where(id: claim).update_all(status: \"completed\", response_body: { id: xp.id })",
        ),
        _ => None,
    }
}
