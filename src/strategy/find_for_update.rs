//! `find-for-update`: check-then-store whose find is `SELECT ... FOR UPDATE`, in the request's transaction (lesson 8).
//!
//! The lock people reach for first. It locks the key row when there is one;
//! when there is none, as in every first request of a race, it locks nothing.

use super::check_then_store::{CheckThenStore, FindLock};
use super::spec::{Can, Figure, Keys, MatrixCell, OnMariadb, Spec, Story, TransactionRule};

/// `find-for-update`.
pub const SPEC: Spec = Spec {
    name: "find-for-update",
    help: "Check-then-store whose find is SELECT ... FOR UPDATE, in the request's transaction (lesson 8)",
    lesson: 8,
    in_course: false,
    keys: Keys::KeyTable,
    transaction: TransactionRule::Needed,
    losers: false,
    figure: Figure::One,
    story: Story::RequestTransaction,
    rails: &[],
    matrix: &MatrixCell::EVERY_LEVEL,
    can: Can::NOTHING,
    on_mariadb: OnMariadb::Runs(super::check_then_store::on_mariadb::for_update),
    build: |options| {
        Box::new(CheckThenStore {
            orm: options.orm,
            lock: FindLock::ForUpdate,
        })
    },
};
