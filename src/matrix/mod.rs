//! `idem matrix`'s cells: every guard shape under each transaction setting and isolation level where it applies, and what its runs came to.
//!
//! Hermitage answers isolation questions with a table of anomalies per
//! level. This is the same table for idempotency: a row per guard shape
//! and setting, measured over a number of runs, never written down.
//! Whether a row *held* is asked twice, for the rows (one XP row) and for
//! the work (one call of the award service), because a transaction can
//! save the first and never the second.

mod g2;

use std::collections::BTreeMap;

use serde::Serialize;

pub use g2::G2;

use crate::db::via::Via;
use crate::race::options::RaceInput;
use crate::race::{Outcome, RaceResult, WorkerReport};
use crate::strategy::StrategyKind;
use crate::strategy::spec::MatrixCell;
use crate::strategy::transaction::{Isolation, Transaction};

/// One row of the matrix: a guard shape and how its requests are wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cell {
    pub strategy: StrategyKind,
    /// A guard file raced in the strategy's place (`--strategy-file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy_file: Option<&'static str>,
    pub transaction: Transaction,
    /// `None` without a request transaction.
    pub isolation: Option<Isolation>,
    pub retry_serialization: u32,
}

impl Cell {
    const fn plain(strategy: StrategyKind) -> Self {
        Self {
            strategy,
            strategy_file: None,
            transaction: Transaction::None,
            isolation: None,
            retry_serialization: 0,
        }
    }

    const fn within(strategy: StrategyKind, level: Isolation, retries: u32) -> Self {
        Self {
            strategy,
            strategy_file: None,
            transaction: Transaction::Request,
            isolation: Some(level),
            retry_serialization: retries,
        }
    }

    /// The cell a race ran in.
    pub fn of(r: &RaceResult) -> Self {
        Self {
            strategy: r.strategy,
            strategy_file: r.strategy_file,
            transaction: r.transaction,
            isolation: r.isolation,
            retry_serialization: r.retry_serialization,
        }
    }

    /// The race's input for this cell: the strategy (or guard file) and
    /// its transaction, on `base`.
    pub fn input(&self, base: &RaceInput) -> RaceInput {
        let base = match self.strategy_file {
            Some(file) => base
                .clone()
                .with(|r| r.strategy.strategy_file = Some(file.into())),
            None => base.for_strategy(self.strategy),
        };
        base.with(|r| {
            r.transaction.transaction = Some(self.transaction);
            r.transaction.isolation = self.isolation;
            // None when 0: the default, and an option a MariaDB race takes.
            r.transaction.retry_serialization =
                (self.retry_serialization > 0).then_some(u64::from(self.retry_serialization));
        })
    }

    /// The shape as the table names it: the strategy, or the guard file.
    pub fn name(&self) -> String {
        crate::strategy::guard_file::label(self.strategy, self.strategy_file)
    }

    /// `none`, `RC`, `RR`, `SER`, `SER+3`: the setting in a few letters.
    pub fn short(&self) -> String {
        let Some(level) = self.isolation else {
            return "none".to_string();
        };
        let level = match level {
            Isolation::ReadCommitted => "RC",
            Isolation::RepeatableRead => "RR",
            Isolation::Serializable => "SER",
        };
        match self.retry_serialization {
            0 => level.to_string(),
            n => format!("{level}+{n}"),
        }
    }

    /// `none`, `request, read-committed`, `request, serializable, 3 retries`.
    pub fn long(&self) -> String {
        let Some(level) = self.isolation else {
            return "none".to_string();
        };
        match self.retry_serialization {
            0 => format!("request, {}", level.name()),
            1 => format!("request, {}, 1 retry", level.name()),
            n => format!("request, {}, {n} retries", level.name()),
        }
    }
}

/// Every cell, in the order the table shows them: the shapes in the order
/// the course teaches them (the course's own first, then the locks people
/// add to check-then-store), each as its spec lists its rows.
pub fn cells() -> Vec<Cell> {
    StrategyKind::matrix()
        .into_iter()
        .map(|(strategy, cell)| match cell {
            MatrixCell::Plain => Cell::plain(strategy),
            MatrixCell::Within(level, retries) => Cell::within(strategy, level, retries),
        })
        .collect()
}

/// A guard file's cells: the rows of the built-in strategy of its shape.
pub fn file_cells(file: crate::strategy::guard_file::GuardRef) -> Vec<Cell> {
    cells()
        .into_iter()
        .filter(|c| c.strategy == file.shape.kind())
        .map(|c| Cell {
            strategy_file: Some(file.0.name.as_str()),
            ..c
        })
        .collect()
}

/// What one cell's runs came to.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixRow {
    #[serde(flatten)]
    pub cell: Cell,
    pub runs: u64,
    /// XP rows → runs that left that many.
    pub xp_rows: BTreeMap<u64, u64>,
    /// Service calls → runs that made that many.
    pub service_calls: BTreeMap<u64, u64>,
    /// The share of runs that left one XP row: the guard held for the rows.
    pub rows_held_rate: f64,
    /// The share of runs that called the service once: it held for the work.
    pub work_held_rate: f64,
    /// What the requests that did not create the XP row were answered
    /// (`201 replay`, `409`, `500 23505`, ...), counted over every run.
    pub told: BTreeMap<String, u64>,
    /// Statements sent per request, on average.
    pub statements_per_request: f64,
    /// Seconds a request held a pooled connection, on average.
    pub connection_seconds_per_request: f64,
    /// On MariaDB, in a request transaction: what the runs showed of
    /// Hermitage's G2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub g2: Option<G2>,
    /// The sums the averages are made of.
    #[serde(skip)]
    sums: Sums,
}

#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    requests: u64,
    statements: u64,
    held_s: f64,
    rows_held: u64,
    work_held: u64,
}

impl MatrixRow {
    pub fn new(cell: Cell) -> Self {
        Self {
            cell,
            runs: 0,
            xp_rows: BTreeMap::new(),
            service_calls: BTreeMap::new(),
            rows_held_rate: 0.0,
            work_held_rate: 0.0,
            told: BTreeMap::new(),
            statements_per_request: 0.0,
            connection_seconds_per_request: 0.0,
            g2: None,
            sums: Sums::default(),
        }
    }

    /// Adds one run's result.
    pub fn add(&mut self, r: &RaceResult) {
        let told = r
            .reports
            .iter()
            .filter(|w| w.outcome != Outcome::Created)
            .map(told);
        let statements = r.reports.iter().map(|w| u64::from(w.queries)).sum::<u64>();
        let held_s = r.reports.iter().map(|w| w.held_ms / 1000.0).sum::<f64>();
        let requests = r.reports.len() as u64;
        self.add_run(
            r.xp_rows,
            r.service_calls,
            told,
            (requests, statements, held_s),
        );
    }

    /// Adds one run's result on MariaDB: a loser's error is the server's
    /// number (`500 1213`).
    pub fn add_engine(&mut self, r: &crate::race::mariadb::EngineResult) {
        let told = r
            .reports
            .iter()
            .filter(|w| w.outcome != Outcome::Created)
            .map(|w| told_as(w.outcome, w.error.as_ref().map(|e| e.number.to_string())));
        let sent = |w: &crate::race::mariadb::EngineWorker| {
            w.steps.iter().filter(|e| e.sql.is_some()).count() as u64
        };
        let statements = r.reports.iter().map(sent).sum::<u64>();
        let held = |w: &crate::race::mariadb::EngineWorker| {
            (w.answer_ms - w.checkout_wait_ms).max(0.0) / 1000.0
        };
        let held_s = r.reports.iter().map(held).sum::<f64>();
        let requests = r.reports.len() as u64;
        self.add_run(
            r.xp_rows,
            r.service_calls,
            told,
            (requests, statements, held_s),
        );
        if self.cell.transaction == Transaction::Request {
            self.g2.get_or_insert_default().add(r);
        }
    }

    /// One run's figures: its XP rows and calls, what the requests that
    /// did not create the row were told, and (requests, statements, seconds
    /// a connection was held).
    fn add_run(
        &mut self,
        xp_rows: u64,
        service_calls: u64,
        told: impl Iterator<Item = String>,
        (requests, statements, held_s): (u64, u64, f64),
    ) {
        self.runs += 1;
        *self.xp_rows.entry(xp_rows).or_default() += 1;
        *self.service_calls.entry(service_calls).or_default() += 1;
        for t in told {
            *self.told.entry(t).or_default() += 1;
        }
        let sums = &mut self.sums;
        sums.rows_held += u64::from(xp_rows == 1);
        sums.work_held += u64::from(service_calls == 1);
        sums.requests += requests;
        sums.statements += statements;
        sums.held_s += held_s;
        let (runs, requests) = (self.runs as f64, sums.requests.max(1) as f64);
        self.rows_held_rate = sums.rows_held as f64 / runs;
        self.work_held_rate = sums.work_held as f64 / runs;
        self.statements_per_request = sums.statements as f64 / requests;
        self.connection_seconds_per_request = sums.held_s / requests;
    }
}

/// What a request that did not create the row was answered, in a few words.
pub fn told(w: &WorkerReport) -> String {
    told_as(w.outcome, w.error.as_ref().map(|e| e.code.clone()))
}

/// The same from an outcome and the error the engine names it by: its
/// SQLSTATE on PostgreSQL (`500 23505`), its number on MariaDB (`500 1213`).
fn told_as(outcome: Outcome, error: Option<String>) -> String {
    match (outcome, error) {
        (Outcome::Duplicate, _) => "201 dup".to_string(),
        (Outcome::Replayed, _) => "201 replay".to_string(),
        (Outcome::Error, Some(error)) => format!("500 {error}"),
        (Outcome::Crashed | Outcome::HungUp, _) => "no answer".to_string(),
        (outcome, _) => format!("{} {}", outcome.status(), outcome.name()),
    }
}

/// The whole matrix: the shared settings and a row per cell.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    /// The engine every race ran on.
    pub engine: crate::race::engine::Engine,
    pub workers: usize,
    pub pool_size: usize,
    pub runner_holds_connection: bool,
    pub work_ms: u64,
    /// How the app's pool reached PostgreSQL: `direct` or `pgbouncer`.
    pub via: Via,
    /// With `--standby`: the standby beside every race.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<crate::race::StandbyFigures>,
    pub runs: u64,
    pub rows: Vec<MatrixRow>,
    /// Rows left out, and why: shown to people only.
    #[serde(skip)]
    pub left_out: Option<&'static str>,
}

impl Matrix {
    /// The matrix of races run elsewhere (a lesson's scenarios), a row per
    /// list of runs; `None` if there are none.
    pub fn of(rows: &[Vec<RaceResult>]) -> Option<Self> {
        let first = rows.iter().flatten().next()?;
        let rows: Vec<MatrixRow> = rows
            .iter()
            .filter_map(|runs| {
                let mut row = MatrixRow::new(Cell::of(runs.first()?));
                runs.iter().for_each(|r| row.add(r));
                Some(row)
            })
            .collect();
        Some(Self {
            engine: crate::race::engine::Engine::Postgres,
            workers: first.workers,
            pool_size: first.pool_size,
            runner_holds_connection: first.runner_holds_connection,
            work_ms: first.work_ms,
            via: first.via,
            standby: first.standby,
            left_out: None,
            runs: rows.iter().map(|r| r.runs).max().unwrap_or(0),
            rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Origin;

    #[test]
    fn every_cell_is_a_race_the_builder_takes() {
        use crate::race::engine::Engine;
        use crate::race::on_engine::OnEngine;
        for cell in cells() {
            let input = cell.input(&RaceInput::default());
            let settings = input.build(Origin::Flags);
            assert!(settings.is_ok(), "{}: {:?}", cell.long(), settings.err());
            // On MariaDB too, but for the cells retried after 40001, which
            // `idem matrix --engine mariadb` leaves out.
            if cell.retry_serialization == 0 {
                let on = OnEngine::of(Engine::Mariadb, &input);
                assert!(on.is_ok(), "{} on MariaDB: {:?}", cell.long(), on.err());
            }
        }
    }
}
