//! `idem probe URL`: race identical requests at any API, count the effects, and optionally check the draft's cases.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;

use crate::cli::{CountFlags, ProbeArgs};
use crate::probe::conformance::{self, Mark};
use crate::probe::{Counter, Probe, probe};
use crate::report::Output;
use crate::report::probe::{render, render_checks};

/// What `idem probe` will do, checked before anything is sent.
pub struct Plan {
    pub probe: Probe,
    pub key: String,
    pub requests: usize,
    pub conformance: Option<Bytes>,
    pub out: Output,
}

pub fn plan(args: &ProbeArgs) -> Result<Plan> {
    let body = match &args.data {
        Some(data) => body_of(data, "--data")?,
        None => Bytes::new(),
    };
    let counter = counter(&args.count)?;
    let probe = Probe::new(
        &args.url,
        &args.method,
        &args.headers,
        body,
        Duration::from_millis(args.timeout_ms),
        counter,
    )?;
    let key = match &args.key {
        Some(key) => crate::http::wire::parse_key(std::iter::once(
            crate::http::wire::quote_key(key).as_bytes(),
        ))
        .map_err(|e| anyhow::anyhow!("--key: {e}"))?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let conformance = match (args.conformance, &args.other_data) {
        (true, Some(other)) => Some(body_of(other, "--other-data")?),
        (true, None) => Some(conformance::other_body(&probe.body)?),
        (false, Some(_)) => {
            bail!("--other-data is the body of --conformance's reuse case; add --conformance")
        }
        (false, None) => None,
    };
    Ok(Plan {
        probe,
        key,
        requests: args.requests as usize,
        conformance,
        out: Output::from_json_flag(args.json),
    })
}

/// `--count-sql` with `--count-database-url`, checked.
pub fn counter(count: &CountFlags) -> Result<Option<Counter>> {
    match (&count.count_sql, &count.count_database_url) {
        (Some(sql), Some(url)) => Ok(Some(Counter::new(sql, url)?)),
        (None, None) => Ok(None),
        _ => bail!("--count-sql and --count-database-url go together"),
    }
}

/// A body given inline, or `@FILE`.
fn body_of(data: &str, flag: &str) -> Result<Bytes> {
    match data.strip_prefix('@') {
        Some(path) => std::fs::read(path)
            .map(Bytes::from)
            .with_context(|| format!("{flag}: could not read {path}")),
        None => Ok(Bytes::from(data.to_owned())),
    }
}

pub async fn execute(plan: Plan) -> Result<()> {
    let out = plan.out;
    let result = probe(&plan.probe, &plan.key, plan.requests).await?;
    if result.shots.iter().all(|s| s.status.is_none())
        && let Some(error) = result.shots.iter().find_map(|s| s.error.clone())
    {
        bail!("no request got an answer: {error}");
    }
    out.record(&result, render)?;
    let mut failed = result.verdict.held == Some(false) && result.effects.is_some();
    if let Some(other) = &plan.conformance {
        let checks = conformance::run(&plan.probe, other, &plan.key, plan.requests).await?;
        for check in &checks {
            out.record(check, |_| String::new())?;
        }
        out.text(|| render_checks("conformance (IETF draft)", &checks))?;
        failed |= checks.iter().any(|c| c.mark == Mark::Fail);
    }
    if failed {
        bail!("the endpoint did not hold (see above)");
    }
    Ok(())
}
