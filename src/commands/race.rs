//! `idem race`: one strategy, N workers, one key; once, or `--runs` times.

use anyhow::{Result, bail};

use crate::cli::output::ShowFlags;
use crate::cli::race::RaceArgs;
use crate::db::Database;
use crate::limits::Origin;
use crate::race::{Race, RaceSettings};
use crate::report::runs::{RunsSummary, render_summary};
use crate::report::trace_file::Files;
use crate::report::{self, Output};

/// What `idem race` will do, checked before the database starts.
pub struct Plan {
    pub settings: RaceSettings,
    pub runs: u64,
    pub trace: bool,
    pub sql: bool,
    pub files: Files,
    pub audit: bool,
    pub out: Output,
}

pub fn plan(args: &RaceArgs) -> Result<Plan> {
    let settings = args.race.input(args.strategy).build(Origin::Flags)?;
    let runs = args.race.runs();
    let show = &args.race.show;
    let files = trace_files(show);
    files.check()?;
    if (show.trace || show.sql || args.race.eviction.audit || !files.is_empty()) && runs > 1 {
        bail!(
            "--trace, --sql, --timeline, --trace-json and --audit show a single race; drop --runs"
        );
    }
    Ok(Plan {
        settings,
        runs,
        trace: show.trace || show.sql,
        sql: show.sql,
        files,
        audit: args.race.eviction.audit,
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

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let out = plan.out;
    let race = Race::prepare(db, plan.settings).await?;
    if plan.runs == 1 {
        let result = race.run(1).await?;
        out.record(&result, report::race::render)?;
        if plan.trace {
            let shown = report::timeline::Shown {
                sql: plan.sql,
                ..Default::default()
            };
            out.text(|| report::timeline::render_with(&result, shown))?;
        }
        if plan.audit && out.for_people() {
            let audit = crate::store::audit::audit(db, &result.key).await?;
            out.text(|| report::stores::render_audit(&audit))?;
        }
        return plan.files.write(&result, out);
    }

    let progress = out.progress(plan.runs, "races");
    let mut summary = RunsSummary::default();
    let mut line = String::new();
    for run in 1..=plan.runs as usize {
        let result = race.run(run).await?;
        out.record(&result, |_| String::new())?;
        if line.is_empty() {
            line = report::race::settings_line(&result);
        }
        summary.add(&result);
        progress.inc(1);
    }
    progress.finish_and_clear();
    out.text(|| render_summary(&summary, &line, race.settings.strategy().name()))
}
