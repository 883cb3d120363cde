//! `idem challenge`: idem's own guard through the challenge's four cases; a learner's, in Rust (`cargo run --example challenge`) or in any language over HTTP (`--url`).

use std::sync::Arc;

use std::time::Duration;

use anyhow::{Result, bail};
use bytes::Bytes;

use crate::challenge::{LOCK_TIMEOUT, judge};
use crate::cli::wire_commands::ChallengeArgs;
use crate::db::Database;
use crate::probe::Probe;
use crate::probe::conformance::{self, Mark};
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

/// The challenge over HTTP: a guard in any language, at `url`, its XP
/// counted by the learner's query. Checked before anything is sent.
pub fn plan_http(args: &ChallengeArgs) -> Result<Option<Probe>> {
    let Some(url) = &args.url else {
        if args.count.count_sql.is_some() {
            bail!("--count-sql judges an app over HTTP; add --url");
        }
        return Ok(None);
    };
    let counter = super::probe::counter(&args.count)?;
    Probe::new(
        url,
        &args.reach.reach(),
        "POST",
        &[],
        Bytes::from_static(AWARD.as_bytes()),
        HTTP_TIMEOUT,
        counter,
    )
    .map(Some)
}

/// Judges the app at the probe's URL with the challenge's four cases.
pub async fn execute_http(probe: Probe, out: Output) -> Result<()> {
    super::probe::check_counter(probe.counter.as_ref()).await?;
    let other = Bytes::from_static(OTHER_AWARD.as_bytes());
    let key = format!("idem-challenge-{}", uuid::Uuid::new_v4());
    let checks = conformance::run(&probe, &other, &key, 5).await?;
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

pub async fn execute(db: &Database, out: Output) -> Result<()> {
    let guard = Guard {
        lock_timeout: LOCK_TIMEOUT,
        ..Guard::default()
    };
    let cases = judge(db, Arc::new(guard)).await?;
    for case in &cases {
        out.record(case, |_| String::new())?;
    }
    out.text(|| render("idem's guard (src/strategy/guard/)", &cases))?;
    if cases.iter().any(|c| !c.passed()) {
        bail!("the guard failed a case");
    }
    Ok(())
}
