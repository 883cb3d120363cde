//! Lesson 8: whether each request runs in one transaction, at which isolation level, and how often it is run again.

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits::{self, Origin, help_with_default as with_default};
use crate::strategy::StrategyKind;
use crate::strategy::transaction::{Isolation, Transaction};

/// `--transaction`, `--isolation`, `--retry-serialization`.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransactionInput {
    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(
        long,
        value_enum,
        value_name = "SCOPE",
        help = "Whether each request runs in one transaction: none (each statement \
                  commits alone, as the course's code) or request. [default: none; request \
                  for find-for-update and advisory-lock, or with --isolation]"
    )]
    pub transaction: Option<Transaction>,

    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(long, value_enum, value_name = "LEVEL",
          help = with_default(
              "The request transaction's isolation level (implies --transaction request); \
               on MariaDB with --store cache, the level of the cache's own write.",
              Isolation::ReadCommitted.name()))]
    pub isolation: Option<Isolation>,

    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::RETRY_SERIALIZATION.parser(),
          help = limits::RETRY_SERIALIZATION.help(
              "Run a request's transaction again, up to N times, when it fails to \
               serialise (40001) or deadlocks (40P01), as apps do at serializable."))]
    pub retry_serialization: Option<u64>,

    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        help = "On MariaDB, claim-work-complete's claim as Rails' find-or-create: find the \
                key, insert it, and after 1062 read it back: plain (from the transaction's \
                snapshot), share (LOCK IN SHARE MODE) or for-update"
    )]
    pub read_back: Option<crate::request::mariadb::ReadBack>,
}

/// The request's transaction.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransactionPlan {
    scope: Transaction,
    isolation: Isolation,
    retries: u32,
}

impl TransactionInput {
    /// The request's transaction: as given; else a transaction when an
    /// isolation level or retries are given, or when the strategy's lock
    /// needs one; else none, as the course's code.
    pub(super) fn resolve(
        &self,
        strategy: StrategyKind,
        origin: Origin,
    ) -> Result<TransactionPlan> {
        let implied = self.isolation.is_some()
            || self.retry_serialization.is_some_and(|n| n > 0)
            || strategy.needs_transaction();
        let scope = match (self.transaction, self.isolation) {
            (Some(Transaction::None), Some(_)) => bail!(
                "{} sets the request transaction's level; {} has none",
                origin.name("--isolation", "race.isolation"),
                origin.name("--transaction none", "race.transaction = \"none\"")
            ),
            (Some(given), _) => given,
            (None, _) if implied => Transaction::Request,
            (None, _) => Transaction::None,
        };
        Ok(TransactionPlan {
            scope,
            isolation: self.isolation.unwrap_or_default(),
            retries: self
                .retry_serialization
                .unwrap_or(limits::RETRY_SERIALIZATION.default())
                .min(u64::from(u32::MAX)) as u32,
        })
    }
}

impl TransactionPlan {
    /// Whether each request runs in one transaction.
    pub fn scope(&self) -> Transaction {
        self.scope
    }

    /// The request transaction's isolation level.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// How many times a transaction that failed to serialise is run again.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}
