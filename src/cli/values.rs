//! How clap reads idem's domain types: by the names they give themselves, one help line per value.
//!
//! clap knows the domain types from here, and they know nothing of clap.

use clap::ValueEnum;

use crate::db::via::Via;
use crate::http::app::OnHangup;
use crate::http::caller::KeyScope;
use crate::keys::{CrashPoint, KeyKind};
use crate::probe::Mode;
use crate::race::fault::FaultPoint;
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::orm::Orm;
use crate::strategy::transaction::{Isolation, Transaction};
use crate::strategy::{LoserKind, StrategyKind};

pub use crate::limits::help_with_default as with_default;

/// Implements `ValueEnum` for a domain type from its `name()` and a help line per value.
macro_rules! value_enum {
    ($ty:ty { $($variant:path => $help:literal),* $(,)? }) => {
        impl ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($variant),*]
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                let help = match self {
                    $($variant => $help,)*
                };
                Some(clap::builder::PossibleValue::new(self.name()).help(help))
            }
        }
    };
}

/// The strategies' values and help lines, as their specs give them.
impl ValueEnum for StrategyKind {
    fn value_variants<'a>() -> &'a [Self] {
        StrategyKind::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let spec = self.spec();
        Some(clap::builder::PossibleValue::new(spec.name).help(spec.help))
    }
}

/// `--release`: the HTTP/1.1 modes, as the one list of modes spells them.
impl ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &Mode::HTTP1
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.flag()).help(self.help()))
    }
}

value_enum!(KeyScope {
    KeyScope::Global => "One key for everyone: another caller's request with the key gets the first caller's answer",
    KeyScope::Caller => "Each caller's keys are its own (by its Authorization header), as Stripe scopes keys by account",
});

value_enum!(OnHangup {
    OnHangup::Cancel => "Drop the request at its next await, as hyper, axum and Go's cancelled contexts do",
    OnHangup::Finish => "Run the request to its end though nobody reads the answer, as Puma and Node do",
});

value_enum!(Transaction {
    Transaction::None => "Each statement commits on its own, as the course's Rails code",
    Transaction::Request => "The whole request in one transaction: BEGIN ... COMMIT, or ROLLBACK on an error",
});

value_enum!(Isolation {
    Isolation::ReadCommitted => "Each statement sees what was committed before it began (PostgreSQL's default)",
    Isolation::RepeatableRead => "One snapshot for the whole transaction, taken at its first statement",
    Isolation::Serializable => "Repeatable read that also fails transactions no serial order explains (40001)",
});

value_enum!(Via {
    Via::Direct => "Each pooled connection is a PostgreSQL server process of its own",
    Via::Pgbouncer => "Through a real PgBouncer in transaction mode, started in front of the \
        disposable cluster: a server process per transaction, not per connection",
});

value_enum!(LoserKind {
    LoserKind::FailFast => "Answer 409 Conflict at once (Stripe, the IETF draft)",
    LoserKind::Poll =>
        "Give the connection back, re-read the claim every --poll-ms until it completes",
    LoserKind::Block => "Wait on the winner's lock, holding a connection, until it commits",
});

value_enum!(StoreKind {
    StoreKind::Table => "The `idempotency_keys` table with its unique index",
    StoreKind::Cache => "The `cache_entries` table, used as Solid Cache is",
    StoreKind::Redis => "A Redis key set with SET NX PX, on a redis-server idem starts",
});

value_enum!(OnFailure {
    OnFailure::Store => "Complete the claim with the 500 and replay it to retries (Stripe)",
    OnFailure::Release => "Delete the claim, so that a retry runs the work again (Powertools)",
});

value_enum!(KeyKind {
    KeyKind::Random => "A new UUIDv4 each time the client starts: lost with every crash",
    KeyKind::Derived =>
        "UUIDv5 of the operation, the user and the lesson: the same on every retry",
    KeyKind::DerivedCoarse => "UUIDv5 of the operation and the user only: too few fields, \
        so two different awards for the same user share a key",
});

value_enum!(CrashPoint {
    CrashPoint::BeforeSend => "Before the request leaves: the server never sees it",
    CrashPoint::AfterWork => "After the server did the work, before the response arrives",
    CrashPoint::AfterResponse =>
        "After the response arrived, before the client recorded it (a reload)",
});

value_enum!(FaultPoint {
    FaultPoint::AfterClaim => "After the claim (or the find), as the work is about to start",
    FaultPoint::DuringWork => "Halfway through the work, before its XP row is written",
    FaultPoint::BeforeComplete =>
        "After the work, as the claim is about to be completed (or the key stored)",
});

value_enum!(Orm {
    Orm::Bare => "One statement per step, as idem writes them",
    Orm::Activerecord =>
        "ActiveRecord 6.1's: SELECT 1 on checkout, each create! in BEGIN ... COMMIT",
});
