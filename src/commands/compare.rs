//! `idem compare`: every strategy under the same settings, side by side.

use anyhow::{Result, bail};

use crate::cli::CompareArgs;
use crate::db::Database;
use crate::race::{Race, RaceSettings};
use crate::report::runs::{RunsSummary, render_compare};
use crate::report::{self, emit, emit_json};
use crate::strategy::StrategyKind;

pub struct Plan {
    pub settings: Vec<RaceSettings>,
    pub runs: u64,
    pub json: bool,
}

pub fn plan(args: &CompareArgs) -> Result<Plan> {
    if args.race.trace {
        bail!("--trace draws a single race; use it with `idem race`");
    }
    let settings: Vec<RaceSettings> = StrategyKind::ALL
        .iter()
        .map(|&s| args.race.settings(s))
        .collect();
    for s in &settings {
        s.validate()?;
    }
    Ok(Plan {
        settings,
        runs: args.race.runs,
        json: args.race.json,
    })
}

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let total = plan.runs * plan.settings.len() as u64;
    let progress = report::progress::bar(total, plan.json, "races");
    let mut rows = Vec::new();
    let mut line = String::new();
    for settings in plan.settings {
        let name = settings.strategy.name().to_string();
        let race = Race::prepare(db, settings).await?;
        let mut summary = RunsSummary::default();
        for run in 1..=plan.runs as usize {
            let result = race.run(run).await?;
            if plan.json {
                emit_json(&result)?;
            }
            if line.is_empty() {
                line = report::race::settings_line(&result);
            }
            summary.add(&result);
            progress.inc(1);
        }
        rows.push((name, summary));
    }
    progress.finish_and_clear();
    if !plan.json {
        emit(&render_compare(&rows, &line))?;
    }
    Ok(())
}
