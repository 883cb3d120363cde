//! `idem matrix`: every guard shape under each transaction setting and isolation level, a number of runs each, in one table.

use anyhow::{Context, Result, bail};

use super::command::{Command, Given, Needs, OnDatabase};
use crate::cli::race::MatrixArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::db::{ConnectOptions, Database};
use crate::limits;
use crate::matrix::{Cell, Matrix, MatrixRow, cells, file_cells};
use crate::race::Race;
use crate::race::engine::Engine;
use crate::race::on_engine::OnEngine;
use crate::race::options::RaceInput;
use crate::report::{self, Output};

/// Where the matrix runs: PostgreSQL (idem's cluster or a URL's), or
/// MariaDB alone (idem's server or a `mysql://` URL's), no PostgreSQL
/// started for it.
pub enum Planned {
    Postgres(Box<Plan>),
    Mariadb(Box<OnMariadb>),
}

/// The matrix on MariaDB: its cells, and the server's options.
pub struct OnMariadb {
    plan: Plan,
    options: MariadbOptions,
}

/// What `idem matrix` will race, checked before the database starts.
pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    engine: Engine,
    cells: Vec<(Cell, OnEngine)>,
    runs: u64,
    pub(crate) out: Output,
    /// The rows left out, and why.
    left_out: Option<&'static str>,
}

pub fn plan(args: &MatrixArgs) -> Result<Planned> {
    let base = RaceInput {
        shape: args.shape.clone(),
        app: args.app.clone(),
        standby: args.standby.clone(),
        ..RaceInput::default()
    };
    // Finds read on a standby: only the cells that find by reading, outside
    // a request transaction.
    let finds_on_standby = base.standby.read_from == Some(crate::race::ReadFrom::Standby);
    // With a guard file, its rows, and the built-in ones -s names.
    let file = args
        .strategy_file
        .as_deref()
        .map(crate::strategy::guard_file::load)
        .transpose()?;
    let every = file.is_none() && args.strategy.is_empty();
    let cells = cells()
        .into_iter()
        .filter(|c| every || args.strategy.contains(&c.strategy))
        .chain(file.map(file_cells).unwrap_or_default())
        .filter(|c| {
            !finds_on_standby
                || (c.transaction == crate::strategy::transaction::Transaction::None
                    && (c.strategy_file.is_some() || c.strategy.finds_by_reading()))
        })
        // On MariaDB a request is not run again: the cells retried after
        // 40001 have no row there, nor the strategies with no InnoDB shape.
        .filter(|c| args.engine == Engine::Postgres || c.retry_serialization == 0)
        .map(|cell| Ok((cell, OnEngine::of(args.engine, &cell.input(&base))?)))
        .filter(|r| !matches!(r, Ok((_, OnEngine::Left(_)))))
        .collect::<Result<Vec<_>>>()?;
    if cells.is_empty() {
        bail!(
            "the matrix has no rows for {}; it holds check-then-store, insert-unique, \
             claim-work-complete, guard, find-for-update and advisory-lock",
            args.strategy
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if args.engine == Engine::Mariadb && (finds_on_standby || args.strategy_file.is_some()) {
        bail!("--engine mariadb races the built-in strategies, with no standby and no guard file");
    }
    let plan = Plan {
        db: match args.engine {
            Engine::Postgres => args.connect.with_standby(&args.standby)?,
            Engine::Mariadb => ConnectOptions::default(),
        },
        engine: args.engine,
        left_out: finds_on_standby.then_some(
            "left out, with no find to send to a standby: the rows in a request transaction, \
             and the strategies that decide by a write or a lock",
        ),
        cells,
        runs: args.runs.unwrap_or(limits::MATRIX_RUNS.default()),
        out: Output::from_json_flag(args.json),
    };
    Ok(match args.engine {
        Engine::Postgres => Planned::Postgres(Box::new(plan)),
        Engine::Mariadb => Planned::Mariadb(Box::new(OnMariadb {
            options: args.connect.mariadb()?,
            plan,
        })),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        self.run_with(Some(db), None).await
    }
}

impl Command for OnMariadb {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone())
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        self.plan.run_with(None, Some(db)).await
    }
}

impl Plan {
    /// Races every cell on the engine it was planned for, and shows the
    /// table: PostgreSQL's cells on `postgres`, MariaDB's on `mariadb`.
    async fn run_with(self, postgres: Option<&Database>, mariadb: Option<&Mariadb>) -> Result<()> {
        let out = self.out;
        let progress = out.progress(self.runs * self.cells.len() as u64, "races");
        let Some(first) = self.cells.first().and_then(|(_, r)| r.settings()) else {
            bail!("no cell of the matrix runs on this engine");
        };
        let (workers, pool, work_ms, via) = (
            first.requests().workers(),
            first.app().pool,
            first.work_ms(),
            first.app().pool.via(),
        );
        let mut matrix = Matrix {
            engine: self.engine,
            workers,
            pool_size: pool.size(),
            runner_holds_connection: pool.runner_holds_connection(),
            work_ms,
            via,
            standby: None,
            left_out: self.left_out,
            runs: self.runs,
            rows: Vec::new(),
        };
        for (cell, raced) in self.cells {
            let mut row = MatrixRow::new(cell);
            match raced {
                // Left out when planned.
                OnEngine::Left(_) => continue,
                OnEngine::Postgres(settings) => {
                    let db = postgres.context("a PostgreSQL cell with no PostgreSQL")?;
                    let mut race = Race::prepare(db, *settings).await?;
                    for run in 1..=self.runs as usize {
                        race = race.again(run).await?;
                        let result = race.run(run).await?;
                        if matrix.standby.is_none() {
                            matrix.standby = result.standby;
                        }
                        row.add(&result);
                        progress.inc(1);
                    }
                }
                OnEngine::Mariadb(race) => {
                    let mariadb = mariadb.context("a MariaDB cell with no MariaDB")?;
                    for run in 1..=self.runs as usize {
                        row.add_engine(&crate::race::mariadb::run(mariadb, &race, run).await?);
                        progress.inc(1);
                    }
                }
            }
            matrix.rows.push(row);
        }
        progress.finish_and_clear();
        out.record(&matrix, report::matrix::render)
    }
}
