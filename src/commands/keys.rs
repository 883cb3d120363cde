//! `idem keys`: clients that crash and retry, with random, derived or too-coarse derived keys (lesson 6).

use std::time::Duration;

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::cli::teaching::KeysArgs;
use crate::db::{ConnectOptions, Database};
use crate::keys::{KeyKind, KeyTemplate, KeysSettings, simulate};
use crate::report::{self, Output};

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    runs: Vec<KeysSettings>,
    compare: bool,
    pub(crate) out: Output,
}

pub fn plan(args: &KeysArgs) -> Result<Plan> {
    if args.compare && args.kind.is_some() {
        bail!("--compare runs every key kind; drop --kind");
    }
    let template = args
        .key_file
        .as_deref()
        .map(KeyTemplate::load)
        .transpose()?;
    let kinds = match args.kind {
        Some(kind) => vec![kind],
        // A key file is one kind of key of its own.
        None if template.is_some() => vec![KeyKind::Random],
        None => KeyKind::ALL.to_vec(),
    };
    let runs: Vec<KeysSettings> = kinds
        .into_iter()
        .map(|kind| KeysSettings {
            kind,
            template: template.clone(),
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
        db: args.connect.options(),
        compare: runs.len() > 1,
        runs,
        out: Output::from_json_flag(args.json),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let mut results = Vec::new();
        for settings in &self.runs {
            let result = simulate(db, settings).await?;
            self.out.record(&result, |_| String::new())?;
            results.push(result);
        }
        self.out.text(|| match self.compare {
            true => report::keys::render_compare(&results),
            false => report::keys::render(&results[0]),
        })
    }
}
