//! `advisory-lock`: check-then-store behind `pg_advisory_xact_lock` on the key, in the request's transaction (lesson 8).
//!
//! A lock on the key's name rather than on a row, so it holds before any row
//! exists: the requests take turns, each holding a pooled connection while
//! it waits.

use super::check_then_store::{CheckThenStore, FindLock};
use super::spec::{
    Can, Figure, Keys, MatrixCell, OnMariadb, SERIALIZABLE_RETRIES, Spec, Story, TransactionRule,
};
use super::transaction::Isolation;

/// `advisory-lock`.
pub const SPEC: Spec = Spec {
    name: "advisory-lock",
    help: "Check-then-store behind pg_advisory_xact_lock on the key, in the request's transaction (lesson 8)",
    lesson: 8,
    in_course: false,
    keys: Keys::KeyTable,
    transaction: TransactionRule::Needed,
    losers: false,
    figure: Figure::One,
    story: Story::RequestTransaction,
    rails: &[],
    matrix: &[
        MatrixCell::Within(Isolation::ReadCommitted, 0),
        MatrixCell::Within(Isolation::RepeatableRead, 0),
        MatrixCell::Within(Isolation::Serializable, 0),
        MatrixCell::Within(Isolation::Serializable, SERIALIZABLE_RETRIES),
    ],
    can: Can::NOTHING,
    on_mariadb: OnMariadb::Runs(super::check_then_store::on_mariadb::advisory),
    build: |options| {
        Box::new(CheckThenStore {
            orm: options.orm,
            lock: FindLock::Advisory,
        })
    },
};
