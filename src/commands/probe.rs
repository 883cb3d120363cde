//! `idem probe URL`: race identical requests at any API, count the effects, and optionally check the draft's cases.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use bytes::Bytes;

use super::command::{Command, Given, Needs, Nothing};
use crate::cli::wire_commands::{CountFlags, ProbeArgs, ReportTo};
use crate::limits;
use crate::probe::bursts::Bursts;
use crate::probe::judged::{Case, Endpoint, Judged};
use crate::probe::profile::Profile;
use crate::probe::{
    Caller, CmdCounter, Counter, MySqlCounter, Probe, SinkCounter, SqlCounter, Verdict,
    count_mysql, probe, schedule,
};
use crate::probe::{cases, conformance};
use crate::report::Output;
use crate::report::probe::{
    counted_words, render, render_bursts, render_checks, render_profile, render_schedule,
};
use crate::report::status::Status;

/// What `idem probe` will do, checked before anything is sent.
pub struct Plan {
    pub(crate) probe: Probe,
    /// `--key`, or `None` for a fresh key per burst.
    key: Option<String>,
    runs: usize,
    requests: usize,
    pub(crate) conformance: Option<Bytes>,
    /// `--other-caller`: the second identity of the conformance's
    /// "another caller" case.
    other_caller: Option<Caller>,
    /// `--in-flight-ms`: when the in-flight cases' second request goes.
    in_flight: Option<Duration>,
    /// `--settle-ms`: how long the abort case retries a 409.
    settle: Duration,
    /// `--retry-at`: the retries' offsets from the first send, in order.
    retry_at: Vec<Duration>,
    /// `--timeout-ms`: how long the whole probe may take, every burst,
    /// case, retry and count in it.
    whole: Duration,
    pub(crate) out: Output,
    /// `--report`: the CI reports to write once every case is judged.
    pub(crate) reports: Vec<ReportTo>,
    /// `--wait-for-ms`: how long to wait for the server to answer at all.
    pub(crate) wait_for: Option<Duration>,
    /// `--other-url`: a second endpoint, for the "another endpoint" case.
    pub(crate) other_endpoint: Option<Probe>,
}

pub fn plan(args: &ProbeArgs) -> Result<Plan> {
    let body = match &args.data {
        Some(data) => body_of(data, "--data")?,
        None => Bytes::new(),
    };
    let counter = counter(&args.count)?;
    let probe = Probe::new(
        args.url.as_deref().unwrap_or_default(),
        &args.reach.reach(),
        &args.method,
        &args.headers,
        body,
        Duration::from_millis(args.timeout_ms),
        counter,
    )?
    .reading_at_most(args.max_response_bytes as usize)
    .releasing(args.release);
    let key = match &args.key {
        Some(key) => Some(
            crate::http::contract::parse_key(std::iter::once(
                crate::http::contract::quote_key(key).as_bytes(),
            ))
            .map_err(|e| anyhow::anyhow!("--key: {e}"))?,
        ),
        None => None,
    };
    if args.runs > 1 && args.conformance {
        bail!("--conformance checks its cases once; drop --runs");
    }
    let conformance = match (args.conformance, &args.other_data) {
        (true, Some(other)) => Some(body_of(other, "--other-data")?),
        (true, None) => Some(conformance::other_body(&probe.body)?),
        (false, Some(_)) => {
            bail!("--other-data is the body of --conformance's reuse case; add --conformance")
        }
        (false, None) => None,
    };
    let other_caller = match (args.other_caller.is_empty(), args.conformance) {
        (true, _) => None,
        (false, true) => Some(Probe::caller(&args.other_caller)?),
        (false, false) => {
            bail!(
                "--other-caller is the second identity of --conformance's cases; add --conformance"
            )
        }
    };
    let whole = Duration::from_millis(args.timeout_ms);
    let retry_at = retry_at(&args.retry_at)?;
    within_the_whole(whole, &retry_at, args.conformance, args.settle_ms)?;
    Ok(Plan {
        key,
        runs: args.runs as usize,
        requests: args.requests.unwrap_or(match args.retry_at.is_empty() {
            true => limits::PROBE_REQUESTS.default(),
            false => 1,
        }) as usize,
        conformance,
        other_caller,
        in_flight: args.in_flight_ms.map(Duration::from_millis),
        settle: Duration::from_millis(args.settle_ms),
        retry_at,
        whole,
        out: Output::from_json_flag(args.json),
        reports: args.report.clone(),
        wait_for: args.wait_for_ms.map(Duration::from_millis),
        other_endpoint: match &args.other_url {
            Some(url) => Some(probe.at(url, &args.reach.reach())?),
            None => None,
        },
        probe,
    })
}

/// Refuses waits the probe is asked for that `--timeout-ms` would cut off
/// before they end: a retry offset, or the abort case's settling.
fn within_the_whole(
    whole: Duration,
    retry_at: &[Duration],
    conformance: bool,
    settle_ms: u64,
) -> Result<()> {
    let ms = whole.as_millis();
    if let Some(late) = retry_at.last().filter(|late| **late >= whole) {
        bail!(
            "--retry-at {} ms is past --timeout-ms {ms}, which bounds the whole probe; \
             raise --timeout-ms",
            late.as_millis()
        );
    }
    if conformance && u128::from(settle_ms) >= ms {
        bail!(
            "--settle-ms {settle_ms} is past --timeout-ms {ms}, which bounds the whole probe; \
             raise --timeout-ms or lower --settle-ms"
        );
    }
    Ok(())
}

/// `--count-sql` with `--count-database-url`, checked.
pub fn counter(count: &CountFlags) -> Result<Option<Counter>> {
    let timeout = Duration::from_millis(count.count_timeout_ms);
    if let Some(cmd) = &count.count_cmd {
        return Ok(Some(Counter::Cmd(CmdCounter::new(cmd, timeout)?)));
    }
    if let Some(addr) = count.sink {
        let delay = Duration::from_millis(count.sink_delay_ms);
        return Ok(Some(Counter::Sink(SinkCounter::new(
            addr,
            count.sink_status,
            delay,
        ))));
    }
    match (&count.count_sql, &count.count_database_url) {
        (Some(sql), Some(url)) if count_mysql::is_mysql(url) => Ok(Some(Counter::MySql(Box::new(
            MySqlCounter::new(sql, url, timeout)?,
        )))),
        (Some(sql), Some(url)) => Ok(Some(Counter::Sql(Box::new(SqlCounter::new(
            sql, url, timeout,
        )?)))),
        (None, None) => Ok(None),
        _ => bail!("--count-sql and --count-database-url go together"),
    }
}

/// The largest body `--data @FILE` (or `--other-data @FILE`) reads.
pub const MAX_DATA_BYTES: u64 = 16 * 1024 * 1024;

/// A body given inline, or `@FILE`: a regular file of at most [`MAX_DATA_BYTES`].
fn body_of(data: &str, flag: &str) -> Result<Bytes> {
    match data.strip_prefix('@') {
        Some(path) => {
            let named = format!("{flag} @{path}");
            let body = crate::files::read_named(Path::new(path), MAX_DATA_BYTES, &named)?;
            Ok(Bytes::from(body))
        }
        None => Ok(Bytes::from(data.to_owned())),
    }
}

/// Asks the server whether the count query is one that idem runs, before
/// any request is sent; its notes go to stderr, apart from the results.
pub async fn check_counter(counter: Option<&Counter>) -> Result<()> {
    if let Some(counter) = counter {
        let notes = counter
            .check()
            .await
            .map_err(|e| Status::CouldNotRun.because(format!("{e:#}")))?;
        for note in notes {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}

impl Command for Plan {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(()).verdict()
    }

    /// Everything within `--timeout-ms`; past it, what was said stands and
    /// the probe ends in one line, judging nothing more.
    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let reports = self.reports.clone();
        let name = self.probe.shown_url.clone();
        let judged = self.judge().await;
        let endpoints = [endpoint(name, judged)];
        super::probe_reports::finish(&reports, &endpoints, exit_status(&endpoints))
    }
}

/// `judged`, as a summary and the reports take it: an endpoint that could
/// not be probed at all (nothing answered, the count could not be taken
/// before the first request) is said so; any other error once requests
/// were sent (`--timeout-ms` ran out, the count after them failed) leaves
/// the probe not judged.
pub fn endpoint(name: String, judged: Result<Vec<Case>>) -> Endpoint {
    match judged {
        Ok(cases) => Endpoint {
            name,
            cases,
            could_not_run: None,
        },
        Err(err) => {
            let why = format!("{err:#}");
            match Status::of(&err) {
                Some(Status::CouldNotRun | Status::BadInput) => Endpoint {
                    name,
                    cases: Vec::new(),
                    could_not_run: Some(why),
                },
                _ => Endpoint {
                    name,
                    cases: vec![Case::new("the probe", Judged::Unjudged, why)],
                    could_not_run: None,
                },
            }
        }
    }
}

/// The exit status the endpoints call for (the same for one probe and a
/// plan): 1 if a case failed, else 4 if an endpoint could not be probed,
/// else 3 if something asked for was not judged, else 0.
pub fn exit_status(endpoints: &[Endpoint]) -> Result<()> {
    let all = || {
        endpoints
            .iter()
            .flat_map(|e| e.cases.iter().map(move |c| (e, c)))
    };
    let failed: Vec<_> = all().filter(|(_, c)| c.judged == Judged::Failed).collect();
    let named = |e: &Endpoint| match endpoints.len() {
        1 => String::new(),
        _ => format!("{}, ", e.name),
    };
    if let Some((e, first)) = failed.first() {
        return Err(Status::Failed.because(format!(
            "{} of {} cases did not hold; the first, {}{}: {}",
            failed.len(),
            all().count(),
            named(e),
            first.case,
            first.saw
        )));
    }
    if let Some(e) = endpoints.iter().find(|e| e.could_not_run.is_some()) {
        let why = e.could_not_run.as_deref().unwrap_or_default();
        return Err(Status::CouldNotRun.because(format!("{}{why}", named(e))));
    }
    if let Some((e, c)) = all().find(|(_, c)| c.judged == Judged::Unjudged) {
        return Err(Status::NotJudged.because(format!(
            "the probe could not judge {}{}: {}; nothing failed, but nothing held either",
            named(e),
            c.case,
            c.saw
        )));
    }
    Ok(())
}

impl Plan {
    /// Every case within `--timeout-ms`; past it, what was said stands and
    /// the probe ends, judging nothing more.
    pub async fn judge(&self) -> Result<Vec<Case>> {
        self.wait_until_up().await?;
        let whole = self.whole;
        match tokio::time::timeout(whole, self.judge_all()).await {
            Ok(done) => done,
            Err(_) => Err(Status::NotJudged.because(format!(
                "the probe did not finish within --timeout-ms {}, which bounds the whole \
                 probe; nothing after that was judged",
                whole.as_millis()
            ))),
        }
    }

    /// With `--wait-for-ms`, waits (outside `--timeout-ms`) until the
    /// server answers anything, and says how long that took.
    async fn wait_until_up(&self) -> Result<()> {
        let Some(within) = self.wait_for else {
            return Ok(());
        };
        let url = &self.probe.shown_url;
        match self.probe.wait_until_up(within).await {
            Some(took) => {
                eprintln!("note: {url} answered after {} ms", took.as_millis());
                Ok(())
            }
            None => Err(Status::CouldNotRun.because(format!(
                "{url} did not answer within --wait-for-ms {}: the service never came up",
                within.as_millis()
            ))),
        }
    }

    /// The probe the command line asks for: a burst, bursts, a schedule of
    /// retries, the conformance cases, each case's verdict.
    async fn judge_all(&self) -> Result<Vec<Case>> {
        let out = self.out;
        check_counter(self.probe.counter.as_ref()).await?;
        if !self.retry_at.is_empty() {
            return schedules(self).await;
        }
        if self.runs > 1 {
            return bursts(self).await;
        }
        let key = self.key.clone().unwrap_or_else(fresh_key);
        let result = probe(&self.probe, &key, self.requests).await?;
        if result.shots.iter().all(|s| s.status.is_none())
            && let Some(error) = result.shots.iter().find_map(|s| s.error.clone())
        {
            return Err(Status::CouldNotRun.because(format!("no request got an answer: {error}")));
        }
        out.record(&result, render)?;
        let burst = match result.verdict {
            _ if !result.verdict.judged => Judged::Unjudged,
            Verdict {
                held: Some(false), ..
            } if result.effects.is_some() => Judged::Failed,
            Verdict {
                held: Some(true), ..
            } => Judged::Held,
            _ => Judged::Undecided,
        };
        let mut cases = vec![Case::new(
            format!("{} requests, one key", self.requests),
            burst,
            format!(
                "{}: {} (key {key:?}; {}{})",
                result
                    .statuses
                    .iter()
                    .map(|(status, n)| format!("{status} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                result.verdict.summary,
                counted_words(result.counted_by),
                match &self.probe.counter {
                    Some(Counter::Sink(sink)) => {
                        format!(", {} of them with the key", sink.calls_for(&key))
                    }
                    _ => String::new(),
                }
            ),
        )];
        if let Some(other) = &self.conformance {
            let delay = conformance::in_flight_delay(&self.probe, &key, self.in_flight).await;
            let given = cases::Given {
                probe: &self.probe,
                key_base: &key,
                concurrent: self.requests,
                other_body: other,
                in_flight: &delay,
                settle: self.settle,
                other_caller: self.other_caller.as_ref(),
                other_endpoint: self.other_endpoint.as_ref(),
            };
            let (checks, seen) = cases::run(&given, |_| true).await?;
            for check in &checks {
                out.record(check, |_| String::new())?;
            }
            out.text(|| render_checks("conformance (IETF draft)", &checks))?;
            out.record(&Profile::of(&seen), render_profile)?;
            cases.extend(checks.iter().map(Case::of_check));
        }
        Ok(cases)
    }
}

/// A key of its own for one burst.
/// The most retries one `--retry-at` schedule sends, and the latest one.
const MAX_RETRIES: usize = 100;
const LATEST_RETRY: Duration = Duration::from_secs(3600);

/// `--retry-at`, checked and in order.
fn retry_at(given: &[Duration]) -> Result<Vec<Duration>> {
    if given.len() > MAX_RETRIES {
        bail!(
            "--retry-at takes at most {MAX_RETRIES} offsets, not {}",
            given.len()
        );
    }
    if let Some(late) = given.iter().find(|d| **d > LATEST_RETRY) {
        bail!("--retry-at {} s is later than an hour", late.as_secs());
    }
    let mut offsets = given.to_vec();
    offsets.sort();
    Ok(offsets)
}

/// `--retry-at`: each run a schedule on a key of its own, each a line of
/// `--json`; a schedule that left more than one effect is a duplicate.
async fn schedules(plan: &Plan) -> Result<Vec<Case>> {
    let (mut duplicates, mut judged) = (0, 0);
    for _ in 0..plan.runs {
        let key = plan.key.clone().unwrap_or_else(fresh_key);
        let s = schedule::run(&plan.probe, &key, plan.requests, &plan.retry_at).await?;
        plan.out.record(&s, render_schedule)?;
        judged += usize::from(s.held.is_some());
        duplicates += usize::from(s.held == Some(false));
    }
    let offsets: Vec<String> = plan
        .retry_at
        .iter()
        .map(|d| format!("{} ms", d.as_millis()))
        .collect();
    let case = format!("retries at {}", offsets.join(", "));
    let runs = plan.runs;
    Ok(vec![if duplicates > 0 {
        Case::new(
            case,
            Judged::Failed,
            format!("{duplicates} of {runs} schedules left more than one effect for their key"),
        )
    } else if judged < runs {
        Case::new(
            case,
            Judged::Unjudged,
            format!(
                "could not judge {} of {runs} schedules: no effect was counted for their key",
                runs - judged
            ),
        )
    } else {
        Case::new(
            case,
            Judged::Held,
            format!("one effect per key in {runs} of {runs} schedules"),
        )
    }])
}

fn fresh_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `--runs R`: R bursts, each a line of `--json`, then what they came to.
async fn bursts(plan: &Plan) -> Result<Vec<Case>> {
    let out = plan.out;
    let progress = out.progress(plan.runs as u64, "bursts");
    let mut summary = Bursts::new(plan.requests);
    let mut spreads = Vec::with_capacity(plan.runs);
    let mut unjudged = None;
    for _ in 0..plan.runs {
        let key = plan.key.clone().unwrap_or_else(fresh_key);
        let result = probe(&plan.probe, &key, plan.requests).await?;
        if !result.verdict.judged {
            unjudged.get_or_insert(result.verdict.summary.clone());
        }
        summary.add(&result, &mut spreads);
        out.record(&result, |_| String::new())?;
        progress.inc(1);
    }
    progress.finish_and_clear();
    out.record(&summary, |s| render_bursts(&plan.probe.shown_url, s))?;
    let case = format!("{} bursts of {}", plan.runs, plan.requests);
    Ok(vec![
        if summary.with_duplicates > 0 && plan.probe.counter.is_some() {
            Case::new(case, Judged::Failed, summary.rate())
        } else if let Some(why) = unjudged {
            Case::new(case, Judged::Unjudged, why)
        } else if summary.held == plan.runs {
            Case::new(case, Judged::Held, summary.rate())
        } else {
            Case::new(case, Judged::Undecided, summary.rate())
        },
    ])
}
