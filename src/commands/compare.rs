//! `idem compare`: every strategy, or with `--losers` every loser policy, under the same settings.

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::cli::race::CompareArgs;
use crate::db::{ConnectOptions, Database};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Race, RaceResult, RaceSettings};
use crate::report::losers::LoserRow;
use crate::report::runs::{RunsSummary, render_compare};
use crate::report::{self, Output};
use crate::strategy::{LoserKind, StrategyKind};

/// What the table's rows compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    Strategies,
    /// Where claim-work-complete keeps its claims (`--stores`).
    Stores,
    Losers,
    /// The strategies, each under every interleaving (`--explore`).
    Interleavings,
}

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    compared: Compared,
    /// One race setting per row, with the row's label.
    rows: Vec<(String, RaceSettings)>,
    runs: u64,
    pub(crate) out: Output,
    /// The course's strategies left out of the table, and why.
    left_out: Option<String>,
    /// What an explored row is: a strategy, or a store.
    explored_row: &'static str,
}

/// A comparison on PostgreSQL alone, or engine by engine.
pub enum Planned {
    Postgres(Box<Plan>),
    Engines(Box<super::compare_engines::Plan>),
    /// `--engine mariadb` on a MySQL or MariaDB server of the user's.
    OnServer(super::compare_engines::OnServer),
}

pub fn plan(args: &CompareArgs) -> Result<Planned> {
    let mut engines = args.engine.clone();
    engines.dedup();
    if engines == [crate::race::engine::Engine::Postgres] {
        return Ok(Planned::Postgres(Box::new(on_postgres(args)?)));
    }
    let plan = Box::new(super::compare_engines::plan(args, &engines)?);
    Ok(match plan.on_server {
        Some(_) => Planned::OnServer(super::compare_engines::OnServer(plan)),
        None => Planned::Engines(plan),
    })
}

/// The strategies, or the loser policies, on PostgreSQL.
fn on_postgres(args: &CompareArgs) -> Result<Plan> {
    if args.race.show.trace {
        bail!("--trace draws a single race; use it with `idem race`");
    }
    let mut left_out = None;
    let (compared, rows) = if args.losers {
        if args.race.input.losers.loser.is_some() {
            bail!("--losers runs every loser policy; drop --loser");
        }
        let rows = LoserKind::ALL
            .iter()
            .map(|&kind| {
                let input = args.race.input(Some(StrategyKind::ClaimWorkComplete));
                let s = input.build_with_loser(kind, Origin::Flags)?;
                Ok((kind.name().to_string(), s))
            })
            .collect::<Result<Vec<_>>>()?;
        (Compared::Losers, rows)
    } else if !args.stores.is_empty() {
        let rows = stores(args)?;
        match args.explore {
            true => (Compared::Interleavings, rows),
            false => (Compared::Stores, rows),
        }
    } else {
        let course = args
            .race
            .input(None)
            .with(|r| r.strategy.strategy_file = None);
        // Finds read on a standby: only the strategies that have one.
        let finds_on_standby =
            args.race.input.standby.read_from == Some(crate::race::ReadFrom::Standby);
        let skipped: Vec<&str> = StrategyKind::course()
            .filter(|s| finds_on_standby && !s.finds_by_reading())
            .map(|s| s.name())
            .collect();
        left_out = (!skipped.is_empty()).then(|| {
            format!(
                "left out, with no find to send to a standby: {}",
                skipped.join(", ")
            )
        });
        let build = |input: RaceInput| match args.explore {
            true => crate::explore::settings(&input),
            false => input.build(Origin::Flags),
        };
        let mut rows = StrategyKind::course()
            .filter(|s| !finds_on_standby || s.finds_by_reading())
            .map(|s| Ok((s.name().to_string(), build(course.for_strategy(s))?)))
            .collect::<Result<Vec<_>>>()?;
        // A guard file is one more row, beside the course's five.
        if let Some(path) = &args.race.input.strategy.strategy_file {
            rows.push((path.display().to_string(), build(args.race.input(None))?));
        }
        match args.explore {
            true => (Compared::Interleavings, rows),
            false => (Compared::Strategies, rows),
        }
    };
    Ok(Plan {
        db: args.connect.with_standby(&args.race.input.standby)?,
        compared,
        rows,
        runs: args.race.runs(),
        out: Output::from_json_flag(args.race.show.json),
        left_out,
        explored_row: match args.stores.is_empty() {
            true => "strategy",
            false => "store",
        },
    })
}

/// `--stores`: claim-work-complete with its claims in each store, the
/// Redis options on the Redis row alone.
fn stores(args: &CompareArgs) -> Result<Vec<(String, RaceSettings)>> {
    use crate::store::StoreKind;
    if args.race.input.store.store.is_some() {
        bail!("--stores compares the stores, a row each; drop --store");
    }
    let mut kinds = args.stores.clone();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let input = args
                .race
                .input(Some(StrategyKind::ClaimWorkComplete))
                .with(|r| {
                    if kind != StoreKind::Redis {
                        r.store = crate::race::options::StoreInput {
                            cache_max_entries: r.store.cache_max_entries,
                            cache_max_age: r.store.cache_max_age,
                            ..Default::default()
                        };
                    }
                    r.store.store = Some(kind);
                });
            let settings = match args.explore {
                true => crate::explore::settings(&input)?,
                false => input.build(Origin::Flags)?,
            };
            Ok((kind.name().to_string(), settings))
        })
        .collect()
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        if self.compared == Compared::Interleavings {
            return explore_each(db, self.rows, self.out, self.explored_row).await;
        }
        let total = self.runs * self.rows.len() as u64;
        let out = self.out;
        let progress = out.progress(total, "races");
        let mut results: Vec<(String, Vec<RaceResult>)> = Vec::new();
        let mut line = String::new();
        for (label, settings) in self.rows {
            let mut race = Race::prepare(db, settings).await?;
            let mut row = Vec::new();
            for run in 1..=self.runs as usize {
                race = race.again(run).await?;
                let result = race.run(run).await?;
                out.record(&result, |_| String::new())?;
                if line.is_empty() {
                    line = match self.compared {
                        Compared::Losers => report::race::settings_line_for_every_loser(&result),
                        _ => report::race::settings_line(&result),
                    };
                }
                // Worker details are only needed for the loser table's latencies.
                row.push(result);
                progress.inc(1);
            }
            results.push((label, row));
        }
        progress.finish_and_clear();
        out.text(|| match self.compared {
            Compared::Strategies | Compared::Stores => {
                let rows: Vec<(String, RunsSummary)> = results
                    .iter()
                    .map(|(label, races)| {
                        let mut summary = RunsSummary::default();
                        races.iter().for_each(|r| summary.add(r));
                        (label.clone(), summary)
                    })
                    .collect();
                let row = match self.compared {
                    Compared::Stores => "store",
                    _ => "strategy",
                };
                let mut text = render_compare(&rows, &line, row);
                if let Some(note) = &self.left_out {
                    text.push_str(&format!("{}\n", report::style::dim(note)));
                }
                text
            }
            Compared::Interleavings => String::new(),
            Compared::Losers => {
                let rows: Vec<LoserRow> = results
                    .iter()
                    .map(|(label, races)| LoserRow::from_races(label, races))
                    .collect();
                report::losers::render(&rows, &line)
            }
        })
    }
}

/// `compare --explore`: each row explored whole (or reduced, past the
/// bound), one JSON object per row, then the table.
async fn explore_each(
    db: &Database,
    rows: Vec<(String, RaceSettings)>,
    out: Output,
    row: &str,
) -> Result<()> {
    let progress = report::progress::counter(!out.for_people(), "interleavings");
    let mut found = Vec::new();
    let mut done = 0;
    for (label, settings) in rows {
        let guard = match settings.app().guard_file {
            Some(file) => format!("--strategy-file {}", file.0.name),
            None => format!("-s {}", settings.strategy().name()),
        };
        let replay = crate::explore::replay_for(&guard, &settings);
        let e = crate::explore::explore(
            db,
            settings,
            &crate::explore::Walking::steps(&replay),
            |n| progress.set_position(done + n),
        )
        .await?;
        done += e.interleavings;
        out.record(&e, |_| String::new())?;
        found.push((label, e));
    }
    progress.finish_and_clear();
    out.text(|| report::explore::render_compare(&found, row))
}
