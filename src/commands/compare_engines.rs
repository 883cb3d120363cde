//! `idem compare --engine postgres,mariadb`: the course's strategies on each engine, row by row, under the same settings.
//!
//! Each strategy races `--runs` times on each engine named; the table puts
//! one engine's row under the other's, with the XP rows, the service calls
//! and the server errors the runs met. A strategy with no shape on an
//! engine is left out there, and the table says why.

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs, OnDatabase};
use crate::cli::race::CompareArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::db::{ConnectOptions, Database};
use crate::explore;
use crate::race::Race;
use crate::race::engine::Engine;
use crate::race::mariadb as on_mariadb;
use crate::race::on_engine::OnEngine;
use crate::report::engine::EngineRow;
use crate::report::{self, Output};
use crate::strategy::StrategyKind;

/// What `idem compare --engine ...` will do, checked before anything starts.
pub struct Plan {
    db: ConnectOptions,
    /// A MySQL or MariaDB server of the user's (`--database-url mysql://`):
    /// every row races there, in a database of the run's own.
    pub(crate) on_server: Option<MariadbOptions>,
    /// (strategy, engine, its race there), in the table's order.
    rows: Vec<(StrategyKind, Engine, OnEngine)>,
    runs: u64,
    /// `--explore`: each row under every interleaving instead of raced.
    explore: bool,
    out: Output,
}

pub fn plan(args: &CompareArgs, engines: &[Engine]) -> Result<Plan> {
    if args.losers {
        bail!("--engine compares the strategies; --losers is PostgreSQL's");
    }
    let on_server = match &args.connect.database_url {
        Some(_) if engines.len() > 1 => bail!(
            "a --database-url names one server: compare --engine mariadb on a MySQL or MariaDB \
             server of yours, or unset it (and DATABASE_URL) to compare the engines on idem's own"
        ),
        Some(_) if engines.contains(&Engine::Mariadb) => Some(args.connect.mariadb()?),
        _ => None,
    };
    let mut rows = Vec::new();
    for strategy in StrategyKind::course() {
        let input = args.race.input(None).for_strategy(strategy);
        for &engine in engines {
            let on = match args.explore {
                true => OnEngine::stepped(engine, &crate::explore::input_of(&input))?,
                false => OnEngine::of(engine, &input)?,
            };
            rows.push((strategy, engine, on));
        }
    }
    if on_server.is_some()
        && rows
            .iter()
            .any(|r| matches!(&r.2, OnEngine::Mariadb(race) if race.cluster.nodes > 1))
    {
        bail!("--nodes races on a Galera cluster of idem's own; drop --database-url");
    }
    Ok(Plan {
        db: args.connect.options(),
        on_server,
        rows,
        runs: args.race.runs(),
        explore: args.explore,
        out: Output::from_json_flag(args.race.show.json),
    })
}

/// `compare --explore --engine ...`: each strategy explored on each
/// engine, whole (or reduced, past the bound), one JSON object per row,
/// then one table with a row per strategy and engine.
async fn explore_each(
    at: Place<'_>,
    rows: Vec<(StrategyKind, Engine, OnEngine)>,
    out: Output,
) -> Result<()> {
    let progress = report::progress::counter(!out.for_people(), "interleavings");
    let (mut found, mut left) = (Vec::new(), String::new());
    let mut done = 0;
    for (strategy, engine, on) in rows {
        let name = strategy.spec().name;
        let label = format!("{name} on {}", engine.spec().server);
        let each = |n| progress.set_position(done + n);
        let e = match on {
            OnEngine::Left(why) => {
                left.push_str(&format!("left out: {label}: {why}\n"));
                continue;
            }
            OnEngine::Postgres(settings) => {
                let replay = explore::replay_for(&format!("-s {name}"), &settings);
                let walking = explore::Walking::steps(&replay);
                explore::explore(at.postgres()?, *settings, &walking, each).await?
            }
            OnEngine::Mariadb(race) => {
                let guard = format!("--engine mariadb -s {name}");
                let replay = explore::replay_for(&guard, race.settings());
                let walking = explore::Walking::steps(&replay);
                explore::explore_mariadb(at.mariadb(1).await?, &race, &walking, each).await?
            }
        };
        done += e.interleavings;
        out.record(&e, |_| String::new())?;
        found.push((label, e));
    }
    progress.finish_and_clear();
    out.text(|| {
        format!(
            "{}{left}",
            report::explore::render_compare(&found, "strategy")
        )
    })
}

/// Where a comparison's rows race: idem's own servers, or the user's
/// MariaDB (every row is MariaDB's there).
#[derive(Clone, Copy)]
enum Place<'a> {
    Own(&'a Database),
    Users(&'a Mariadb),
}

impl Place<'_> {
    fn postgres(&self) -> Result<&Database> {
        match self {
            Place::Own(db) => Ok(db),
            Place::Users(_) => bail!("a PostgreSQL row on a MariaDB server"),
        }
    }

    /// The MariaDB of `nodes`: idem's own, started when first needed, or
    /// the user's.
    async fn mariadb(&self, nodes: usize) -> Result<&Mariadb> {
        match self {
            Place::Own(db) => db.mariadb_on(nodes).await,
            Place::Users(server) => Ok(server),
        }
    }
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        self.run_at(Place::Own(db)).await
    }
}

/// The comparison on a MySQL or MariaDB server of the user's.
pub struct OnServer(pub Box<Plan>);

impl Command for OnServer {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.0.on_server.clone().unwrap_or_default())
    }

    async fn run(self, server: &Mariadb, _: Given) -> Result<()> {
        self.0.run_at(Place::Users(server)).await
    }
}

impl Plan {
    async fn run_at(self, at: Place<'_>) -> Result<()> {
        let out = self.out;
        if self.explore {
            return explore_each(at, self.rows, out).await;
        }
        let raced = self
            .rows
            .iter()
            .filter(|r| !matches!(r.2, OnEngine::Left(_)));
        let progress = out.progress(self.runs * raced.count() as u64, "races");
        let mut table = Vec::new();
        let mut line = String::new();
        for (strategy, engine, raced) in self.rows {
            let mut row = EngineRow::new(strategy, engine);
            match raced {
                OnEngine::Left(why) => row.left_out = Some(why),
                OnEngine::Postgres(settings) => {
                    let mut race = Race::prepare(at.postgres()?, *settings).await?;
                    for run in 1..=self.runs as usize {
                        race = race.again(run).await?;
                        let r = race.run(run).await?;
                        out.record(&r, |_| String::new())?;
                        if line.is_empty() {
                            line = report::race::settings_line(&r);
                        }
                        let codes = r.reports.iter().filter_map(|w| w.error.as_ref());
                        row.add(r.xp_rows, r.service_calls, codes.map(|e| e.code.clone()));
                        progress.inc(1);
                    }
                }
                OnEngine::Mariadb(race) => {
                    let mariadb = at.mariadb(race.cluster.nodes).await?;
                    for run in 1..=self.runs as usize {
                        let r = on_mariadb::run(mariadb, &race, run).await?;
                        out.record(&r, |_| String::new())?;
                        if line.is_empty() {
                            line = report::engine::settings_line(&r);
                        }
                        let numbers = r.reports.iter().filter_map(|w| w.error.as_ref());
                        let shown = numbers.map(|e| format!("{} ({})", e.number, e.sqlstate));
                        row.add(r.xp_rows, r.service_calls, shown);
                        progress.inc(1);
                    }
                }
            }
            table.push(row);
        }
        progress.finish_and_clear();
        out.text(|| report::engine::render_compare(&table, &line, self.runs))
    }
}
