//! `idem challenge`: idem's own guard through the challenge's four cases; a learner's, in Rust (`cargo run --example challenge`) or in any language over HTTP (`--url`).

use std::sync::Arc;

use std::time::Duration;

use anyhow::{Result, bail};
use bytes::Bytes;

use super::command::{Command, Given, Needs, Nothing};
use crate::challenge::{STALE_AFTER, judge};
use crate::cli::wire_commands::ChallengeArgs;
use crate::db::{ConnectOptions, Database};
use crate::probe::Probe;
use crate::probe::cases;
use crate::probe::conformance::Mark;
use crate::report::Output;
use crate::report::challenge::render;
use crate::report::challenge::render_checks;
use crate::strategy::guard::Guard;

/// The course's award as a learner's app receives it.
const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;
/// The same award with another amount: the reuse case.
const OTHER_AWARD: &str = r#"{"user_id": 42, "amount": 20}"#;

/// How long each of the challenge's requests may take over HTTP.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The challenge, planned: at a URL or in-process, or its starting point
/// written.
pub enum Challenge {
    AtUrl(Box<AtUrl>),
    InProcess(Box<InProcess>),
    Starter(super::starter::Written),
}

/// A guard in any language, at a URL, its XP counted by the learner's query.
pub struct AtUrl {
    probe: Probe,
    out: Output,
}

/// idem's own guard, in-process on the database.
pub struct InProcess {
    out: Output,
    db: ConnectOptions,
}

/// The challenge over HTTP when `--url` is given, else in-process; checked
/// before anything is sent or started.
pub fn plan(args: &ChallengeArgs) -> Result<Challenge> {
    let out = Output::from_json_flag(args.json);
    if let Some(language) = args.starter {
        return Ok(Challenge::Starter(super::starter::Written { language }));
    }
    let Some(url) = &args.url else {
        if args.count.count_sql.is_some() {
            bail!("--count-sql judges an app over HTTP; add --url");
        }
        return Ok(Challenge::InProcess(Box::new(InProcess {
            out,
            db: args.connect.options(),
        })));
    };
    let counter = super::probe::counter(&args.count)?;
    let probe = Probe::new(
        url,
        &args.reach.reach(),
        "POST",
        &[],
        Bytes::from_static(AWARD.as_bytes()),
        HTTP_TIMEOUT,
        counter,
    )?;
    Ok(Challenge::AtUrl(Box::new(AtUrl { probe, out })))
}

/// Judges the app at the probe's URL with the challenge's four cases.
impl Command for AtUrl {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(()).verdict()
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let (probe, out) = (self.probe, self.out);
        super::probe::check_counter(probe.counter.as_ref()).await?;
        let other = Bytes::from_static(OTHER_AWARD.as_bytes());
        let key = format!("idem-challenge-{}", uuid::Uuid::new_v4());
        let given = cases::Given {
            probe: &probe,
            key_base: &key,
            concurrent: 5,
            other_body: &other,
            in_flight: &(std::time::Duration::ZERO, String::new()),
            settle: std::time::Duration::ZERO,
            other_caller: None,
            other_endpoint: None,
        };
        let (checks, _) = cases::run(&given, |c| c.in_challenge).await?;
        for check in &checks {
            out.record(check, |_| String::new())?;
        }
        let title = format!("idem challenge · {}", probe.shown_url);
        out.text(|| render_checks(&title, &checks))?;
        if checks.iter().any(|c| c.mark != Mark::Pass) {
            bail!("the app failed a case");
        }
        Ok(())
    }
}

/// Judges idem's own guard with the challenge's four cases.
impl Command for InProcess {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone()).verdict()
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        let out = self.out;
        let guard = Guard {
            stale_after: STALE_AFTER,
            ..Guard::default()
        };
        let cases = judge(db, Arc::new(guard)).await?;
        for case in &cases {
            out.record(case, |_| String::new())?;
        }
        out.text(|| render("idem's guard (src/strategy/guard/)", &cases))?;
        let failed: Vec<String> = cases
            .iter()
            .filter(|c| !c.passed())
            .map(|c| format!("{} ({})", c.case, c.saw))
            .collect();
        if !failed.is_empty() {
            bail!(
                "the guard failed {} of {} cases: {}",
                failed.len(),
                cases.len(),
                failed.join("; ")
            );
        }
        Ok(())
    }
}
