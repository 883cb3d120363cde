//! `idem race`: one strategy, N workers, one key; once, or `--runs` times.

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::cli::output::ShowFlags;
use crate::cli::race::RaceArgs;
use crate::db::{ConnectOptions, Database};
use crate::limits::Origin;
use crate::race::{Race, RaceSettings};
use crate::report::runs::{RunsSummary, render_summary};
use crate::report::style::warn;
use crate::report::trace_file::Files;
use crate::report::{self, Output};

/// What `idem race` will do, checked before the database starts.
pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    settings: RaceSettings,
    runs: u64,
    trace: bool,
    sql: bool,
    files: Files,
    audit: bool,
    pub(crate) out: Output,
}

/// A race on the engine `--engine` names.
pub enum Planned {
    Postgres(Box<Plan>),
    Mariadb(Box<super::race_mariadb::Plan>),
}

pub fn plan(args: &RaceArgs) -> Result<Planned> {
    Ok(match args.engine {
        crate::race::engine::Engine::Postgres => Planned::Postgres(Box::new(on_postgres(args)?)),
        crate::race::engine::Engine::Mariadb => {
            Planned::Mariadb(Box::new(super::race_mariadb::plan(args)?))
        }
    })
}

/// The race on PostgreSQL.
pub fn on_postgres(args: &RaceArgs) -> Result<Plan> {
    let settings = args
        .race
        .input(args.strategy.strategy)
        .build(Origin::Flags)?;
    let runs = args.race.runs();
    let show = &args.race.show;
    let files = trace_files(show);
    files.check()?;
    if (show.trace || show.sql || !files.is_empty()) && settings.app().replicas > 1 {
        bail!(
            "--trace, --sql, --timeline and --trace-json draw the steps, and over --replicas \
             they stay in each replica's process; drop --replicas to see them"
        );
    }
    if (show.trace || show.sql || args.race.input.eviction.audit || !files.is_empty()) && runs > 1 {
        bail!(
            "--trace, --sql, --timeline, --trace-json and --audit show a single race; drop --runs"
        );
    }
    Ok(Plan {
        db: args.connect.with_standby(&args.race.input.standby)?,
        settings,
        runs,
        trace: show.trace || show.sql,
        sql: show.sql,
        files,
        audit: args.race.input.eviction.audit,
        out: Output::from_json_flag(args.race.show.json),
    })
}

/// The trace files `--timeline` and `--trace-json` ask for.
pub fn trace_files(show: &ShowFlags) -> Files {
    Files {
        html: show.timeline.clone(),
        trace_json: show.trace_json.clone(),
    }
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let out = self.out;
        let mut race = Race::prepare(db, self.settings).await?;
        if self.runs == 1 {
            let result = race.run(1).await?;
            out.record(&result, report::race::render)?;
            if self.trace {
                let shown = report::timeline::Shown {
                    sql: self.sql,
                    ..Default::default()
                };
                out.text(|| report::timeline::render_with(&result, shown))?;
            }
            if self.audit && out.for_people() {
                let audit = crate::store::audit::audit(db, &result.key).await?;
                out.text(|| report::stores::render_audit(&audit))?;
            }
            return self.files.write(&result, out);
        }

        let mut tally = Tally {
            summary: RunsSummary::default(),
            line: String::new(),
            strategy: race.settings.strategy().name(),
            planned: self.runs,
            progress: out.progress(self.runs, "races"),
            out,
            done: false,
        };
        for run in 1..=self.runs as usize {
            race = race.again(run).await?;
            let result = match race.run(run).await {
                Ok(result) => result,
                Err(err) => {
                    tally.done = true;
                    return Err(err);
                }
            };
            out.record(&result, |_| String::new())?;
            if tally.line.is_empty() {
                tally.line = report::race::settings_line(&result);
            }
            tally.summary.add(&result);
            tally.progress.inc(1);
        }
        tally.done = true;
        tally.progress.finish_and_clear();
        out.text(|| render_summary(&tally.summary, &tally.line, tally.strategy))
    }
}

/// The runs so far. A run stopped by Ctrl-C or SIGTERM drops it mid-way,
/// and then it shows the races that did finish, marked as interrupted,
/// before the tables are dropped.
struct Tally {
    summary: RunsSummary,
    line: String,
    strategy: &'static str,
    planned: u64,
    progress: indicatif::ProgressBar,
    out: Output,
    done: bool,
}

impl Drop for Tally {
    fn drop(&mut self) {
        if self.done || self.summary.runs == 0 {
            return;
        }
        self.progress.finish_and_clear();
        let _ = self.out.text(|| {
            format!(
                "{}\n{}",
                warn(format!(
                    "interrupted: {} of {} runs finished; these are their figures",
                    self.summary.runs, self.planned
                )),
                render_summary(&self.summary, &self.line, self.strategy)
            )
        });
    }
}
