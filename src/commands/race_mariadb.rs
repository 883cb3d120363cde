//! `idem race --engine mariadb`: the same race on a disposable MariaDB (InnoDB), once or `--runs` times.
//!
//! What a MariaDB race takes so far is the race's shape (workers, key,
//! pool, work, checkout timeout, transaction and isolation) and
//! `--runs`/`--json`; any other option is refused in one line, naming it,
//! rather than ignored.

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs};
use crate::cli::race::RaceArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::limits::Origin;
use crate::race::mariadb::{self, MariadbRace};
use crate::report::{self, Output};

/// What `idem race --engine mariadb` will do, checked before the server starts.
pub struct Plan {
    options: MariadbOptions,
    race: MariadbRace,
    runs: u64,
    out: Output,
    /// `--trace`, or `--sql` (the steps with their statements).
    trace: Option<bool>,
}

pub fn plan(args: &RaceArgs) -> Result<Plan> {
    let show = &args.race.show;
    if show.timeline.is_some() || show.trace_json.is_some() {
        bail!(
            "--engine mariadb draws its steps with --trace (and --sql); --timeline and \
             --trace-json are PostgreSQL's so far"
        );
    }
    if (show.trace || show.sql) && args.race.runs() > 1 {
        bail!("--trace and --sql show a single race; drop --runs");
    }
    let input = args.race.input(args.strategy.strategy);
    let race = MariadbRace::from_input(&input, Origin::Flags)?;
    if race.cluster.kill_node.is_some() && args.race.runs() > 1 {
        bail!("--kill-node kills a node for good: one race, no --runs");
    }
    Ok(Plan {
        options: args.connect.mariadb_for(race.cluster.nodes)?,
        race,
        runs: args.race.runs(),
        out: Output::from_json_flag(show.json),
        trace: (show.trace || show.sql).then_some(show.sql),
    })
}

impl Command for Plan {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone())
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        let out = self.out;
        if self.runs == 1 {
            let result = mariadb::run(db, &self.race, 1).await?;
            out.record(&result, report::engine::render)?;
            if let Some(sql) = self.trace {
                out.text(|| report::engine::render_steps(&result, sql))?;
            }
            return Ok(());
        }
        let progress = out.progress(self.runs, "races");
        let mut results = Vec::new();
        for run in 1..=self.runs as usize {
            let result = mariadb::run(db, &self.race, run).await?;
            out.record(&result, |_| String::new())?;
            results.push(result);
            progress.inc(1);
        }
        progress.finish_and_clear();
        out.text(|| report::engine::render_runs(&results))
    }
}
