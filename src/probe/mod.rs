//! `idem probe`: N identical requests with one Idempotency-Key at any HTTP API, released together, the effects counted in its database.
//!
//! Load generators look at status codes and API fuzzers do not replay
//! concurrently; neither counts what the requests did. A probe opens every
//! connection first, releases all the requests at once through a gate,
//! records what each client got, and, given a query, counts the effects
//! before and after: more than one effect for one key is duplicate work,
//! whatever the statuses said. [`conformance`] runs the IETF draft's cases.

pub mod bursts;
pub mod cases;
pub mod conformance;
pub mod count;
pub mod count_cmd;
pub mod count_mysql;
pub mod failure_classes;
pub mod judged;
pub mod profile;
pub mod release;
pub mod schedule;
mod shot;
pub mod sink;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::secret::hide_header_value;
use crate::http::client::{self, Outgoing, Reach, Target};
use crate::http::contract::{KEY_HEADER, quote_key};
use crate::http::stream::Protocol;
use anyhow::{Result, bail};
use bytes::Bytes;
pub use count::SqlCounter;
pub use count_cmd::CmdCounter;
pub use count_mysql::MySqlCounter;
use hyper::Method;
use hyper::header::{HeaderName, HeaderValue};
pub use release::{Mode, Release};
use serde::Serialize;
pub use shot::Shot;
pub use sink::SinkCounter;

/// Where a probe counts the effects: a query on a database, or any command.
#[derive(Debug, Clone)]
pub enum Counter {
    Sql(Box<SqlCounter>),
    MySql(Box<MySqlCounter>),
    Cmd(CmdCounter),
    Sink(SinkCounter),
}

impl Counter {
    /// Checks, before any request, that the count can be taken: the query
    /// as the server reads it, or the command run once. Notes for the user.
    pub async fn check(&self) -> Result<Vec<String>> {
        match self {
            Counter::Sql(sql) => sql.check().await,
            Counter::MySql(sql) => sql.check().await,
            Counter::Cmd(cmd) => cmd.count().await.map(|_| Vec::new()),
            Counter::Sink(sink) => sink.start().await,
        }
    }

    /// Where the effects are counted, as the table, the JSON and the
    /// reports name it.
    pub fn place(&self) -> &'static str {
        match self {
            Counter::Sql(_) | Counter::MySql(_) => "count_sql",
            Counter::Cmd(_) => "count_cmd",
            Counter::Sink(_) => "sink",
        }
    }

    /// The effects so far.
    pub async fn count(&self) -> Result<i64> {
        match self {
            Counter::Sql(sql) => sql.count().await,
            Counter::MySql(sql) => sql.count().await,
            Counter::Cmd(cmd) => cmd.count().await,
            Counter::Sink(sink) => Ok(sink.count()),
        }
    }
}

/// The headers of a second caller, never shown by their values.
#[derive(Debug, Clone)]
pub struct Caller(Vec<(HeaderName, HeaderValue)>);

/// What to send, where, and where to count.
#[derive(Debug, Clone)]
pub struct Probe {
    target: Target,
    /// The URL as it may be printed: no query string (it may hold a token).
    pub(crate) shown_url: String,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// How long each volley may take, connections included.
    timeout: Duration,
    pub(crate) counter: Option<Counter>,
    /// How HTTP/1.1 requests are released.
    http1: Mode,
}

/// One volley: what each request got, and how they were released.
#[derive(Debug, Clone)]
pub struct Volley {
    pub shots: Vec<Shot>,
    pub release: Release,
}

impl Probe {
    /// Checks everything a probe needs before anything is sent.
    pub fn new(
        url: &str,
        reach: &Reach,
        method: &str,
        headers: &[String],
        body: Bytes,
        timeout: Duration,
        counter: Option<Counter>,
    ) -> Result<Self> {
        let target = Target::parse_with(url, reach)?;
        let method = Method::from_bytes(method.trim().to_ascii_uppercase().as_bytes())
            .map_err(|_| anyhow::anyhow!("{method:?} is not an HTTP method"))?;
        let headers = headers
            .iter()
            .enumerate()
            .map(|(i, h)| header("--header", i + 1, h))
            .collect::<Result<Vec<_>>>()?;
        let shown_url = shown(url);
        Ok(Self {
            target,
            shown_url,
            method,
            headers,
            body,
            timeout,
            counter,
            http1: Mode::default(),
        })
    }

    /// The same probe aimed at another endpoint `url` of the API (the
    /// "another endpoint" case), reached as this one is.
    pub fn at(&self, url: &str, reach: &Reach) -> Result<Self> {
        let mut target = Target::parse_with(url, reach)?;
        target.max_response_bytes = self.target.max_response_bytes;
        Ok(Self {
            target,
            shown_url: shown(url),
            ..self.clone()
        })
    }

    /// Releases HTTP/1.1 requests as `http1` says (HTTP/2 always goes in
    /// one packet; asked of HTTP/1.1, HTTP/2's mode is the last byte).
    pub fn releasing(mut self, http1: Mode) -> Self {
        self.http1 = http1;
        self
    }

    /// Reads at most `bytes` of each answer's body; a longer one is reported
    /// as such for that request, and the probe goes on.
    pub fn reading_at_most(mut self, bytes: usize) -> Self {
        self.target.max_response_bytes = bytes;
        self
    }

    /// The request with `key` (or none) and `body`.
    fn outgoing(&self, key: Option<&str>, body: &Bytes) -> Outgoing {
        if let (Some(Counter::Sink(sink)), Some(key)) = (&self.counter, key) {
            sink.sends(key.trim().trim_matches('"'));
        }
        let mut headers = self.headers.clone();
        if let Some(key) = key
            && let Ok(value) = HeaderValue::from_str(&quote_key(key))
        {
            headers.push((HeaderName::from_static(KEY_HEADER), value));
        }
        let has_type = headers
            .iter()
            .any(|(n, _)| n == hyper::header::CONTENT_TYPE);
        if !has_type
            && !body.is_empty()
            && serde_json::from_slice::<serde_json::Value>(body).is_ok()
        {
            headers.push((
                hyper::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ));
        }
        Outgoing {
            method: self.method.clone(),
            path: self.target.path.clone(),
            headers,
            body: body.clone(),
        }
    }

    /// Sends `n` copies of one request at once, released as tightly as the
    /// protocol allows ([`release`]). One shot per request, in order.
    pub async fn volley(&self, key: Option<&str>, body: &Bytes, n: usize) -> Volley {
        let outgoing = Arc::new(self.outgoing(key, body));
        let (mut shots, release) =
            release::volley(&self.target, outgoing, n, self.http1, self.timeout).await;
        mark_first_success(&mut shots);
        Volley { shots, release }
    }

    /// The headers that make another caller (`--other-caller`), checked as
    /// `--header` is.
    pub fn caller(texts: &[String]) -> Result<Caller> {
        let headers = texts
            .iter()
            .enumerate()
            .map(|(i, h)| header("--other-caller", i + 1, h))
            .collect::<Result<Vec<_>>>()?;
        Ok(Caller(headers))
    }

    /// One request on its own, sent as `caller`: its headers in place of
    /// the probe's of the same names.
    pub async fn once_as(&self, caller: &Caller, key: Option<&str>, body: &Bytes) -> Shot {
        let mut outgoing = self.outgoing(key, body);
        outgoing
            .headers
            .retain(|(name, _)| !caller.0.iter().any(|(other, _)| other == name));
        outgoing.headers.extend(caller.0.iter().cloned());
        let opened = Instant::now();
        let received = client::once(&self.target, &outgoing, self.timeout).await;
        Shot::new(1, opened, received)
    }

    /// One request that its client gives up on `linger` after it is sent:
    /// the connection is closed without reading; true when the server had
    /// answered by then.
    pub async fn hang_up(&self, key: Option<&str>, body: &Bytes, linger: Duration) -> Result<bool> {
        let outgoing = self.outgoing(key, body);
        client::hang_up_after_sending(&self.target, &outgoing, linger, self.timeout).await
    }

    /// One request on its own with `extra` headers added after the
    /// probe's (a second key line, a replay marker) and `query` added to
    /// its URL's query string.
    pub async fn once_with(
        &self,
        key: Option<&str>,
        extra: &[(HeaderName, HeaderValue)],
        query: Option<&str>,
    ) -> Shot {
        let mut outgoing = self.outgoing(key, &self.body);
        outgoing.headers.extend(extra.iter().cloned());
        if let Some(query) = query {
            let joint = if outgoing.path.contains('?') {
                '&'
            } else {
                '?'
            };
            outgoing.path = format!("{}{joint}{query}", outgoing.path);
        }
        let opened = Instant::now();
        let received = client::once(&self.target, &outgoing, self.timeout).await;
        Shot::new(1, opened, received)
    }

    /// One request per key, all sent at once, each on a connection of its
    /// own; in the order of `keys`, each timed from its own send.
    pub async fn each_at_once(&self, keys: &[String]) -> Vec<Shot> {
        let mut sending = tokio::task::JoinSet::new();
        for (i, key) in keys.iter().enumerate() {
            let (target, timeout) = (self.target.clone(), self.timeout);
            let outgoing = self.outgoing(Some(key), &self.body);
            sending.spawn(async move {
                let opened = Instant::now();
                let received = client::once(&target, &outgoing, timeout).await;
                Shot::new(i + 1, opened, received)
            });
        }
        let mut shots = sending.join_all().await;
        shots.sort_by_key(|s| s.request);
        shots
    }

    /// One request on its own.
    pub async fn once(&self, key: Option<&str>, body: &Bytes) -> Shot {
        let opened = Instant::now();
        let received = client::once(&self.target, &self.outgoing(key, body), self.timeout).await;
        Shot::new(1, opened, received)
    }

    /// Waits until the endpoint's server answers anything at all over HTTP
    /// (a `GET` of its path, no key: never an effect), trying every 100 ms
    /// for at most `within`; how long that took, or `None` if it never did.
    pub async fn wait_until_up(&self, within: Duration) -> Option<Duration> {
        let began = Instant::now();
        let knock = Outgoing {
            method: Method::GET,
            path: self.target.path.clone(),
            headers: Vec::new(),
            body: Bytes::new(),
        };
        loop {
            let left = within.saturating_sub(began.elapsed());
            if left.is_zero() {
                return None;
            }
            let try_for = left.min(Duration::from_secs(1));
            if client::once(&self.target, &knock, try_for).await.is_ok() {
                return Some(began.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100).min(left)).await;
        }
    }

    /// The effects so far, if a count was asked for.
    pub async fn count(&self) -> Result<Option<i64>> {
        match &self.counter {
            Some(counter) => Ok(Some(counter.count().await?)),
            None => Ok(None),
        }
    }
}

/// `Name: value`, checked. A header is never shown by its value (nor, when
/// it cannot be read as a header, at all): it may carry a credential, which
/// is also remembered so that no error from below can show it.
fn header(flag: &str, number: usize, text: &str) -> Result<(HeaderName, HeaderValue)> {
    let Some((name, value)) = text.split_once(':') else {
        bail!(
            "{flag} number {number} has no colon; write it as 'Name: value' (its text is not shown: it may hold a credential)"
        );
    };
    hide_header_value(value);
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
        anyhow::anyhow!(
            "{flag} number {number}: the part before the colon is not a header name (not shown: it may hold a credential)"
        )
    })?;
    if name.as_str() == KEY_HEADER {
        bail!("{flag} cannot set Idempotency-Key; use --key");
    }
    let value = HeaderValue::from_str(value.trim()).map_err(|_| {
        anyhow::anyhow!(
            "{flag} {}: the value is not valid in a header",
            name.as_str()
        )
    })?;
    Ok((name, value))
}

/// Compares every answer's body with that of the success that arrived first.
fn mark_first_success(shots: &mut [Shot]) {
    let first = shots
        .iter_mut()
        .filter(|s| s.succeeded())
        .min_by_key(|s| s.answered)
        .map(|s| {
            s.first_success = true;
            s.body.clone()
        });
    if let Some(first) = first {
        for shot in shots.iter_mut().filter(|s| s.succeeded()) {
            shot.same_as_first_success = Some(shot.body == first);
        }
    }
}

/// `201 ×1, 409 ×4`-style counts, keyed by status (`none` for no answer).
pub fn statuses(shots: &[Shot]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for shot in shots {
        let name = shot.status.map_or("none".to_owned(), |s| s.to_string());
        *counts.entry(name).or_default() += 1;
    }
    counts
}

/// How many different bodies the clients that got an answer received.
pub fn distinct_bodies(shots: &[Shot]) -> usize {
    shots
        .iter()
        .filter(|s| s.status.is_some())
        .map(|s| &s.body)
        .collect::<BTreeSet<_>>()
        .len()
}

/// The effects one volley caused, counted before and after.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Effects {
    pub before: i64,
    pub after: i64,
    pub effects: i64,
}

impl Effects {
    /// The count's change; a change that does not fit in 64 bits (a
    /// counter that wrapped, say) is an error, never a wrong figure.
    pub fn between(before: i64, after: i64) -> Result<Self> {
        let Some(effects) = after.checked_sub(before) else {
            bail!(
                "--count-sql went from {before} to {after}: the difference does not fit in 64 bits, so the effects cannot be told"
            );
        };
        Ok(Self {
            before,
            after,
            effects,
        })
    }
}

/// What a probe concluded.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// `true`: one effect; `false`: duplicates (or a sign of them); `null`: cannot tell.
    pub held: Option<bool>,
    pub summary: String,
    /// `false` when the answers themselves make the probe unable to judge
    /// (a redirect it does not follow, a status outside HTTP's range): the
    /// run then fails, whatever was counted.
    pub judged: bool,
}

impl Verdict {
    fn judged(held: Option<bool>, summary: String) -> Self {
        Self {
            held,
            summary,
            judged: true,
        }
    }

    fn unjudged(summary: String) -> Self {
        Self {
            held: None,
            summary,
            judged: false,
        }
    }
}

/// Why a burst was no race, if it was none: fewer than two of its requests
/// were sent (a server that takes one HTTP/2 stream at a time), or some got
/// no answer (refused by a GOAWAY, failed on this side, still running when
/// the effects were counted again). Nothing is judged held on such a burst:
/// what did not reach the server, or whose effect may land later, proves
/// nothing about the guard.
pub fn not_raced(shots: &[Shot], release: &Release) -> Option<String> {
    let asked = shots.len();
    let unanswered: Vec<&Shot> = shots.iter().filter(|s| s.status.is_none()).collect();
    if unanswered.is_empty() && asked >= 2 {
        return None;
    }
    let first_error = unanswered
        .iter()
        .find_map(|s| Some((s.request, s.error.as_deref()?)))
        .map_or(String::new(), |(request, e)| {
            format!(" (request {request}: {e})")
        });
    if release.sent < asked {
        let why = match release.notes.first() {
            Some(note) => format!(": {note}"),
            None => first_error,
        };
        let instead = match release.protocol {
            Protocol::Http2 => {
                "; race it over HTTP/1.1 instead, one connection a request (--http1.1, or without --http2-prior-knowledge)"
            }
            Protocol::Http11 => "",
        };
        let were = if release.sent == 1 { "was" } else { "were" };
        return Some(format!(
            "not judged: only {} of {asked} requests {were} sent{why}{instead}",
            release.sent
        ));
    }
    if asked < 2 {
        return Some("not judged: one request is no race; send at least 2 (-n)".into());
    }
    Some(format!(
        "not judged: {} of {asked} requests got no answer{first_error}, so this was no race of {asked}, \
         and what they did may not all be counted",
        unanswered.len()
    ))
}

/// A whole probe: what was sent, what came back, what it did.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    pub url: String,
    pub method: String,
    pub key: String,
    pub requests: usize,
    pub shots: Vec<Shot>,
    pub statuses: BTreeMap<String, u64>,
    pub distinct_bodies: usize,
    pub effects: Option<Effects>,
    /// Where the effects were counted: `count_sql`, `count_cmd` or
    /// `sink`; none without a count.
    pub counted_by: Option<&'static str>,
    pub verdict: Verdict,
    /// How the requests were released.
    pub release: Release,
}

/// Counts, fires `n` requests with `key`, counts again, and judges.
pub async fn probe(p: &Probe, key: &str, n: usize) -> Result<ProbeResult> {
    let others = || match &p.counter {
        Some(Counter::Sink(sink)) => sink.others(),
        _ => 0,
    };
    let (before, others_before) = (p.count().await?, others());
    let Volley { shots, release } = p.volley(Some(key), &p.body, n).await;
    let after = p.count().await?;
    let effects = match before.zip(after) {
        Some((b, a)) => Some(Effects::between(b, a)?),
        None => None,
    };
    let mut verdict = judge(&shots, effects, &release);
    let strays = others() - others_before;
    if strays > 0 {
        verdict.summary.push_str(&format!(
            "; the sink also got {strays} call{} carrying none of the probe's keys, not counted \
             (an API must forward the Idempotency-Key for its calls to count)",
            if strays == 1 { "" } else { "s" }
        ));
    }
    Ok(ProbeResult {
        url: p.shown_url.clone(),
        method: p.method.to_string(),
        key: key.to_owned(),
        requests: n,
        statuses: statuses(&shots),
        distinct_bodies: distinct_bodies(&shots),
        shots,
        effects,
        counted_by: p.counter.as_ref().map(Counter::place),
        verdict,
        release,
    })
}

fn judge(shots: &[Shot], effects: Option<Effects>, release: &Release) -> Verdict {
    if let Some(summary) = unjudgeable(shots) {
        return Verdict::unjudged(summary);
    }
    // More than one effect for one key is a duplicate, however few of the
    // requests got through: that much was measured.
    if let Some(n) = effects.map(|e| e.effects).filter(|n| *n > 1) {
        return Verdict::judged(Some(false), format!("duplicate: {n} effects for one key"));
    }
    if let Some(summary) = not_raced(shots, release) {
        return Verdict::unjudged(summary);
    }
    let fresh_successes = shots
        .iter()
        .filter(|s| s.succeeded() && !s.replayed)
        .count();
    let differing = shots
        .iter()
        .filter(|s| s.succeeded() && s.same_as_first_success == Some(false))
        .count();
    match effects.map(|e| e.effects) {
        Some(1) => Verdict::judged(Some(true), "held: one effect for one key".into()),
        // Nothing measured: no verdict, and the run does not pass.
        Some(n) => Verdict::unjudged(format!(
            "not judged: no effect counted ({n}): did every request fail, or does the query count something else?"
        )),
        None if differing > 0 => Verdict::judged(
            Some(false),
            format!(
                "suspect: {fresh_successes} requests succeeded without a replay and {differing} got another body than the first; \
                 count the effects with --count-sql to know"
            ),
        ),
        None => Verdict::judged(
            None,
            "the statuses are consistent; count the effects with --count-sql to be sure".into(),
        ),
    }
}

/// Why these answers cannot be judged, if they cannot: a redirect (the
/// probe follows none, so the request never reached what it guards) or a
/// status outside HTTP's 100–599.
fn unjudgeable(shots: &[Shot]) -> Option<String> {
    let statuses: Vec<u16> = shots.iter().filter_map(|s| s.status).collect();
    let odd: BTreeSet<u16> = statuses
        .iter()
        .copied()
        .filter(|s| !(100..=599).contains(s))
        .collect();
    if let Some(status) = odd.first() {
        return Some(format!(
            "cannot judge: status {status} is not an HTTP status (100–599); is this an HTTP API?"
        ));
    }
    let redirects = statuses.iter().filter(|s| (300..400).contains(*s)).count();
    if redirects > 0 {
        return Some(format!(
            "cannot judge: {redirects} of {} answers were redirects (3xx), which the probe does not follow; point it at the URL that does the work",
            shots.len()
        ));
    }
    None
}

/// A URL as it may be printed: without its query string, which may hold a
/// token.
fn shown(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => url.to_owned(),
    }
}
