//! `idem race --engine mariadb`: the same race on a disposable MariaDB (InnoDB), once or `--runs` times.
//!
//! What a MariaDB race takes so far is the race's shape (workers, key,
//! pool, work, checkout timeout, transaction and isolation) and
//! `--runs`/`--json`; any other option is refused in one line, naming it,
//! rather than ignored.

use anyhow::{Result, bail};
use serde_json::Value;

use super::command::{Command, Given, Needs};
use crate::cli::race::RaceArgs;
use crate::engine::mariadb::race::{self, MariadbRace};
use crate::engine::mariadb::{Mariadb, MariadbOptions};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::report::{self, Output};

/// The options a MariaDB race takes, as the race's inputs name them.
const TAKES: &[&str] = &[
    "workers",
    "key",
    "strategy",
    "pool_size",
    "no_runner_connection",
    "runner_connection",
    "runner_holds_connection",
    "work_ms",
    "checkout_timeout_ms",
    "transaction",
    "isolation",
];

/// What `idem race --engine mariadb` will do, checked before the server starts.
pub struct Plan {
    options: MariadbOptions,
    race: MariadbRace,
    runs: u64,
    out: Output,
}

pub fn plan(args: &RaceArgs) -> Result<Plan> {
    if args.connect.database_url.is_some() {
        bail!(
            "--engine mariadb races on a MariaDB of idem's own; a server's URL (--database-url \
             or DATABASE_URL) is not taken there yet: unset it"
        );
    }
    let show = &args.race.show;
    if show.trace || show.sql || show.timeline.is_some() || show.trace_json.is_some() {
        bail!(
            "--engine mariadb shows each worker's steps in its table; --trace, --sql, --timeline and --trace-json are PostgreSQL's so far"
        );
    }
    let input = args.race.input(args.strategy.strategy);
    refuse_untaken(&input)?;
    let settings = input.build(Origin::Flags)?;
    if settings.app().transaction.retries() > 0 {
        bail!(
            "--retry-serialization is PostgreSQL's so far: on MariaDB a request is not run again"
        );
    }
    let race = MariadbRace::new(settings, input.transaction.isolation)?;
    Ok(Plan {
        options: MariadbOptions {
            bin: args.connect.cluster.mariadb_bin.clone(),
            template_cache: None,
        },
        race,
        runs: args.race.runs(),
        out: Output::from_json_flag(show.json),
    })
}

/// Refuses, naming it, any option a MariaDB race does not take yet.
fn refuse_untaken(input: &RaceInput) -> Result<()> {
    let defaults = RaceInput::default();
    let pairs = [
        (
            serde_json::to_value(&input.shape)?,
            serde_json::to_value(&defaults.shape)?,
        ),
        (
            serde_json::to_value(&input.wire)?,
            serde_json::to_value(&defaults.wire)?,
        ),
        (
            serde_json::to_value(&input.strategy)?,
            serde_json::to_value(&defaults.strategy)?,
        ),
        (
            serde_json::to_value(&input.app)?,
            serde_json::to_value(&defaults.app)?,
        ),
        (
            serde_json::to_value(&input.losers)?,
            serde_json::to_value(&defaults.losers)?,
        ),
        (
            serde_json::to_value(&input.amounts)?,
            serde_json::to_value(&defaults.amounts)?,
        ),
        (
            serde_json::to_value(&input.fingerprints)?,
            serde_json::to_value(&defaults.fingerprints)?,
        ),
        (
            serde_json::to_value(&input.store)?,
            serde_json::to_value(&defaults.store)?,
        ),
        (
            serde_json::to_value(&input.eviction)?,
            serde_json::to_value(&defaults.eviction)?,
        ),
        (
            serde_json::to_value(&input.guard)?,
            serde_json::to_value(&defaults.guard)?,
        ),
        (
            serde_json::to_value(&input.transaction)?,
            serde_json::to_value(&defaults.transaction)?,
        ),
        (
            serde_json::to_value(&input.standby)?,
            serde_json::to_value(&defaults.standby)?,
        ),
        (
            serde_json::to_value(&input.faults)?,
            serde_json::to_value(&defaults.faults)?,
        ),
        (
            serde_json::to_value(&input.hang_up)?,
            serde_json::to_value(&defaults.hang_up)?,
        ),
    ];
    for (given, default) in &pairs {
        let Value::Object(given) = given else {
            continue;
        };
        for (name, value) in given {
            if TAKES.contains(&name.as_str()) || default.get(name) == Some(value) {
                continue;
            }
            bail!(
                "--engine mariadb does not take --{} yet (it takes --workers, --key, --pool-size, \
                 --work-ms, --checkout-timeout-ms, --transaction, --isolation, --runs, --json)",
                name.replace('_', "-")
            );
        }
    }
    Ok(())
}

impl Command for Plan {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone())
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        let out = self.out;
        if self.runs == 1 {
            let result = race::run(db, &self.race, 1).await?;
            return out.record(&result, report::engine::render);
        }
        let progress = out.progress(self.runs, "races");
        let mut results = Vec::new();
        for run in 1..=self.runs as usize {
            let result = race::run(db, &self.race, run).await?;
            out.record(&result, |_| String::new())?;
            results.push(result);
            progress.inc(1);
        }
        progress.finish_and_clear();
        out.text(|| report::engine::render_runs(&results))
    }
}
