//! `idem keys`: clients that crash and retry, with random, derived or too-coarse derived keys (lesson 6).

use std::time::Duration;

use anyhow::{Result, bail};

use crate::cli::KeysArgs;
use crate::db::Database;
use crate::keys::{KeyKind, KeysSettings, simulate};
use crate::report::{self, emit, emit_json};

pub struct Plan {
    pub runs: Vec<KeysSettings>,
    pub compare: bool,
    pub json: bool,
}

pub fn plan(args: &KeysArgs) -> Result<Plan> {
    if args.compare && args.kind.is_some() {
        bail!("--compare runs every key kind; drop --kind");
    }
    let kinds = match args.kind {
        Some(kind) => vec![kind],
        None => KeyKind::ALL.to_vec(),
    };
    let runs: Vec<KeysSettings> = kinds
        .into_iter()
        .map(|kind| KeysSettings {
            kind,
            clients: args.clients as usize,
            intents: args.intents as usize,
            retries: args.retries as usize,
            crash_at: args.crash_at,
            fingerprint: !args.no_fingerprint,
            work: Duration::from_millis(args.work_ms),
        })
        .collect();
    for s in &runs {
        s.validate()?;
    }
    Ok(Plan {
        compare: runs.len() > 1,
        runs,
        json: args.json,
    })
}

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let mut results = Vec::new();
    for settings in &plan.runs {
        let result = simulate(db, settings).await?;
        if plan.json {
            emit_json(&result)?;
        }
        results.push(result);
    }
    if plan.json {
        return Ok(());
    }
    if plan.compare {
        emit(&report::keys::render_compare(&results))
    } else {
        emit(&report::keys::render(&results[0]))
    }
}
