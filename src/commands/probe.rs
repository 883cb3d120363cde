//! `idem probe URL`: race identical requests at any API, count the effects, and optionally check the draft's cases.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;

use crate::cli::{CountFlags, ProbeArgs, ReleaseFlag};
use crate::probe::conformance::{self, Mark};
use crate::probe::{Counter, Http1Release, Probe, probe};
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
        &args.reach.reach(),
        &args.method,
        &args.headers,
        body,
        Duration::from_millis(args.timeout_ms),
        counter,
    )?
    .reading_at_most(args.max_response_bytes as usize)
    .releasing(match args.release {
        ReleaseFlag::LastByte => Http1Release::LastByte,
        ReleaseFlag::Whole => Http1Release::Whole,
    });
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
    let timeout = Duration::from_millis(count.count_timeout_ms);
    match (&count.count_sql, &count.count_database_url) {
        (Some(sql), Some(url)) => Ok(Some(Counter::new(sql, url, timeout)?)),
        (None, None) => Ok(None),
        _ => bail!("--count-sql and --count-database-url go together"),
    }
}

/// The largest body `--data @FILE` (or `--other-data @FILE`) reads.
pub const MAX_DATA_BYTES: u64 = 16 * 1024 * 1024;

/// A body given inline, or `@FILE`: a regular file of at most [`MAX_DATA_BYTES`].
fn body_of(data: &str, flag: &str) -> Result<Bytes> {
    let Some(path) = data.strip_prefix('@') else {
        return Ok(Bytes::from(data.to_owned()));
    };
    let file =
        std::fs::File::open(path).with_context(|| format!("{flag}: could not read {path}"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("{flag}: could not read {path}"))?;
    if !meta.is_file() {
        bail!("{flag} @{path} is not a regular file (a FIFO, device or directory); give a file");
    }
    let too_big = || {
        anyhow::anyhow!(
            "{flag} @{path} is over {MAX_DATA_BYTES} bytes (16 MiB), the most a probe sends"
        )
    };
    if meta.len() > MAX_DATA_BYTES {
        return Err(too_big());
    }
    // The file may grow while it is read: read one byte past the limit to know.
    let mut body = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_DATA_BYTES + 1)
        .read_to_end(&mut body)
        .with_context(|| format!("{flag}: could not read {path}"))?;
    if body.len() as u64 > MAX_DATA_BYTES {
        return Err(too_big());
    }
    Ok(Bytes::from(body))
}

/// Asks the server whether the count query is one that idem runs, before
/// any request is sent; its notes go to stderr, apart from the results.
pub async fn check_counter(counter: Option<&Counter>) -> Result<()> {
    if let Some(counter) = counter {
        for note in counter.check().await? {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}

pub async fn execute(plan: Plan) -> Result<()> {
    let out = plan.out;
    check_counter(plan.probe.counter.as_ref()).await?;
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
    if !result.verdict.judged {
        bail!("the probe could not judge the endpoint (see above)");
    }
    if failed {
        bail!("the endpoint did not hold (see above)");
    }
    Ok(())
}
