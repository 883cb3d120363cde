//! Designing the key itself (lesson 6): clients that crash and retry, with random or derived keys.
//!
//! A client sends an award, the server does the work, and the response never
//! arrives: the client crashed, the page reloaded, the network dropped. The
//! client sends again. Whether the retry is recognised depends only on
//! whether it carries the same key: a random UUID made when the client starts
//! is lost with the crash; a key derived from the intent's stable fields is
//! made again, identical. Derived from too few fields, it also matches a
//! genuinely different intent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use uuid::Uuid;

use crate::db::pool::{Workers, warm_pool};
use crate::db::{Database, book};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Lease, Outcome, Request, Trace};
use crate::strategy::fingerprint::Params;
use crate::strategy::{OPERATION, Strategy, StrategyKind, work};

/// The namespace of idem's derived keys (UUIDv5).
const NAMESPACE: Uuid = Uuid::from_u128(0x6964_656d_2d6b_6579_732d_6c65_7373_6f6e);

/// How a client makes its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyKind {
    /// A new UUIDv4 each time the client starts: lost with every crash.
    Random,
    /// UUIDv5 of the operation, the user and the lesson: the same on every retry.
    Derived,
    /// UUIDv5 of the operation and the user only: too few fields, so two
    /// different awards for the same user share a key.
    DerivedCoarse,
}

impl KeyKind {
    pub const ALL: [KeyKind; 3] = [KeyKind::Random, KeyKind::Derived, KeyKind::DerivedCoarse];

    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Random => "random",
            KeyKind::Derived => "derived",
            KeyKind::DerivedCoarse => "derived-coarse",
        }
    }

    /// The key a client sends for `params` on one attempt.
    pub fn key(self, params: &Params) -> String {
        match self {
            KeyKind::Random => Uuid::new_v4().to_string(),
            KeyKind::Derived => {
                let name = format!(
                    "{}/user={}/lesson={}",
                    params.operation, params.user_id, params.lesson
                );
                Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
            }
            KeyKind::DerivedCoarse => {
                let name = format!("{}/user={}", params.operation, params.user_id);
                Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
            }
        }
    }
}

/// A key made from a template over the intent's fields (`idem keys
/// --key-file`, lesson 6's exercise): `{operation}`, `{user_id}`,
/// `{lesson}`, `{amount}`, and `{random}`, a new UUID each time the client
/// starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct KeyTemplate(String);

/// The most a key file may hold.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A key file as TOML says it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    key: toml::Spanned<String>,
}

impl KeyTemplate {
    /// The fields a template may name.
    pub const FIELDS: [&'static str; 5] = ["operation", "user_id", "lesson", "amount", "random"];

    /// A template whose every `{field}` is known and whose keys are ones
    /// an Idempotency-Key header can carry.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields = || {
            Self::FIELDS
                .iter()
                .map(|f| format!("{{{f}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut rest = text;
        while let Some(open) = rest.find(['{', '}']) {
            if rest[open..].starts_with('}') {
                return Err(format!("a }} without its {{; a key may use {}", fields()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("a {{ without its }}; a key may use {}", fields()));
            };
            let name = &rest[open + 1..open + close];
            if !Self::FIELDS.contains(&name) {
                return Err(format!(
                    "{{{name}}} is not a field; a key may use {}",
                    fields()
                ));
            }
            rest = &rest[open + close + 1..];
        }
        let template = KeyTemplate(text.to_string());
        let sample = Params {
            operation: OPERATION,
            user_id: 1000,
            amount: 10,
            lesson: 1,
        };
        crate::request::key::check(&template.key(&sample)).map_err(|e| e.to_string())?;
        Ok(template)
    }

    /// The key file at `path`: `key = "..."`, and nothing else.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let name = path.display().to_string();
        let bytes = crate::files::read_regular(path, MAX_KEY_FILE_BYTES, "key file")?;
        let text =
            String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{name} is not UTF-8 text"))?;
        let line = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
        let file: KeyFile = toml::from_str(&text).map_err(|err| {
            let at = err.span().map(|s| format!(" line {}", line(s.start)));
            anyhow::anyhow!(
                "{name}{}: {}",
                at.unwrap_or_default(),
                err.message().trim().replace('\n', " ")
            )
        })?;
        Self::parse(file.key.get_ref())
            .map_err(|why| anyhow::anyhow!("{name} line {}: {why}", line(file.key.span().start)))
    }

    /// The key a client sends for `params` on one attempt.
    pub fn key(&self, params: &Params) -> String {
        self.0
            .replace("{operation}", params.operation)
            .replace("{user_id}", &params.user_id.to_string())
            .replace("{lesson}", &params.lesson.to_string())
            .replace("{amount}", &params.amount.to_string())
            .replace("{random}", &Uuid::new_v4().to_string())
    }

    pub fn text(&self) -> &str {
        &self.0
    }
}

/// Where a client's attempt dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// Before the request leaves: the server never sees it.
    BeforeSend,
    /// After the server did the work, before the response arrives.
    AfterWork,
    /// After the response arrived, before the client recorded it (a reload).
    AfterResponse,
}

impl CrashPoint {
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::BeforeSend => "before-send",
            CrashPoint::AfterWork => "after-work",
            CrashPoint::AfterResponse => "after-response",
        }
    }

    /// The point as the table's column says it.
    pub fn words(self) -> &'static str {
        match self {
            CrashPoint::BeforeSend => "before it sent",
            CrashPoint::AfterWork => "after the server's work, before the answer",
            CrashPoint::AfterResponse => "after the answer, before it recorded it",
        }
    }
}

/// One `idem keys` simulation.
#[derive(Debug, Clone, Serialize)]
pub struct KeysSettings {
    pub kind: KeyKind,
    /// A key file's template, made in place of `kind`'s keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<KeyTemplate>,
    pub clients: usize,
    /// Distinct awards each client makes (one per lesson).
    pub intents: usize,
    /// Retries after the first attempt; every attempt but the last crashes.
    pub retries: usize,
    pub crash_at: CrashPoint,
    pub fingerprint: bool,
    #[serde(skip)]
    pub work: Duration,
}

impl KeysSettings {
    pub fn validate(&self) -> Result<()> {
        if self.clients == 0 || self.intents == 0 {
            bail!("--clients and --intents must be at least 1");
        }
        if self.retries == 0 {
            bail!(
                "--retries must be at least 1: with no retry there is nothing for a key to recognise"
            );
        }
        Ok(())
    }
}

/// Where a crashing attempt dies unless told otherwise.
pub const DEFAULT_CRASH_AT: CrashPoint = CrashPoint::AfterWork;

/// How long the server's work takes in these simulations unless told otherwise, in ms.
pub const DEFAULT_KEYS_WORK_MS: u64 = crate::limits::KEYS_WORK_MS.default();

/// One attempt a client made.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub client: usize,
    pub lesson: i32,
    pub attempt: usize,
    pub key: String,
    /// Where this attempt crashed, if it did.
    pub crashed: Option<CrashPoint>,
    /// The server's answer, if the request was sent.
    pub status: Option<u16>,
    pub outcome: Option<Outcome>,
    pub did: String,
}

impl KeysResult {
    /// What its counts do not bear out, each read off its attempts a
    /// second way: the requests sent, the distinct keys they carried, the
    /// awards asked for, and the rows against the awards that got one.
    pub fn disagreements(&self) -> Vec<String> {
        let sent: Vec<&Attempt> = self
            .attempts
            .iter()
            .filter(|a| a.status.is_some())
            .collect();
        let keys: std::collections::HashSet<&str> = sent.iter().map(|a| a.key.as_str()).collect();
        let mut wrong = Vec::new();
        let mut expect = |what: &str, said: u64, found: u64| {
            if said != found {
                wrong.push(format!("{what}: {said} said, {found} found"));
            }
        };
        expect(
            "requests sent",
            self.attempts_sent as u64,
            sent.len() as u64,
        );
        expect("keys used", self.keys_used as u64, keys.len() as u64);
        expect(
            "awards asked for",
            self.expected_xp_rows,
            (self.clients * self.intents) as u64,
        );
        expect(
            "awards that got a row",
            self.xp_rows.saturating_sub(self.duplicates),
            self.expected_xp_rows.saturating_sub(self.merged_intents),
        );
        wrong
    }
}

/// What a simulation left behind.
#[derive(Debug, Clone, Serialize)]
pub struct KeysResult {
    pub kind: KeyKind,
    /// The key file's template, when the keys were made from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<KeyTemplate>,
    pub clients: usize,
    pub intents: usize,
    pub retries: usize,
    pub crash_at: CrashPoint,
    /// Requests that reached the server.
    pub attempts_sent: usize,
    pub keys_used: usize,
    pub xp_rows: u64,
    /// One XP row per intent.
    pub expected_xp_rows: u64,
    /// XP rows beyond one per intent.
    pub duplicates: u64,
    /// Intents that got no XP row of their own: their key matched another
    /// intent's, so they were replayed or rejected instead of awarded.
    pub merged_intents: u64,
    pub elapsed_ms: f64,
    pub attempts: Vec<Attempt>,
}

/// Runs the clients on fresh tables and counts what they left.
pub async fn simulate(db: &Database, s: &KeysSettings) -> Result<KeysResult> {
    s.validate()?;
    db.reset().await?;
    let pool = warm_pool(db.workers_config(), s.clients.min(50)).await?;
    // Fail-fast claim-work-complete on the key table: the shape lesson 6 judges keys with.
    let shape = RaceInput::with_strategy(StrategyKind::ClaimWorkComplete).build(Origin::Flags)?;
    let strategy: Arc<dyn Strategy> = Arc::from(shape.build_strategy());
    let began = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for client in 1..=s.clients {
        clients.spawn(run_client(
            client,
            s.clone(),
            pool.clone(),
            strategy.clone(),
        ));
    }
    let mut attempts = Vec::new();
    while let Some(done) = clients.join_next().await {
        attempts.extend(done.context("a client panicked")??);
    }
    let elapsed = began.elapsed();
    attempts.sort_by_key(|a| (a.client, a.lesson, a.attempt));

    let mut tx = db.book().await?;
    let per_intent: Vec<(i64, i32, i64)> = book::query_as(
        &db.sql("SELECT user_id, lesson, count(*) FROM experience_points GROUP BY user_id, lesson"),
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let xp_rows: i64 = per_intent.iter().map(|(_, _, n)| n).sum();
    let duplicates: i64 = per_intent.iter().map(|(_, _, n)| n - 1).sum();
    let expected = (s.clients * s.intents) as u64;
    let mut keys: Vec<&str> = attempts
        .iter()
        .filter(|a| a.status.is_some())
        .map(|a| a.key.as_str())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    Ok(KeysResult {
        kind: s.kind,
        template: s.template.clone(),
        clients: s.clients,
        intents: s.intents,
        retries: s.retries,
        crash_at: s.crash_at,
        attempts_sent: attempts.iter().filter(|a| a.status.is_some()).count(),
        keys_used: keys.len(),
        xp_rows: xp_rows as u64,
        expected_xp_rows: expected,
        duplicates: duplicates as u64,
        merged_intents: expected - per_intent.len() as u64,
        elapsed_ms: elapsed.as_secs_f64() * 1000.0,
        attempts,
    })
}

/// One client: each of its intents in turn, each retried until an attempt
/// survives.
async fn run_client(
    client: usize,
    s: KeysSettings,
    pool: Workers,
    strategy: Arc<dyn Strategy>,
) -> Result<Vec<Attempt>> {
    let mut attempts = Vec::new();
    for intent in 1..=s.intents {
        let params = Params {
            operation: OPERATION,
            user_id: 1000 + client as i64,
            amount: 10,
            lesson: intent as i32,
        };
        for attempt in 1..=s.retries + 1 {
            // The key is made when the client (re)starts, as a real client would.
            let key = match &s.template {
                Some(template) => template.key(&params),
                None => s.kind.key(&params),
            };
            let crashes = attempt <= s.retries;
            let crashed = crashes.then_some(s.crash_at);
            if crashed == Some(CrashPoint::BeforeSend) {
                attempts.push(Attempt {
                    client,
                    lesson: params.lesson,
                    attempt,
                    key,
                    crashed,
                    status: None,
                    outcome: None,
                    did: "never sent".into(),
                });
                continue;
            }
            let req = Request::new(client, key.clone(), params.clone(), s.fingerprint, s.work);
            let mut trace = Trace::new(Instant::now());
            let mut lease = Lease::new(pool.clone(), Duration::from_secs(30));
            let answer = strategy.handle(&mut lease, &req, &mut trace).await?;
            lease.release();
            let mut did = answer.did.clone();
            if answer.outcome == Outcome::Replayed
                && let Some(wrong) = work::wrong_replay(&req, answer.body.as_ref())
            {
                did = format!("{did}: {wrong}");
            }
            attempts.push(Attempt {
                client,
                lesson: params.lesson,
                attempt,
                key,
                crashed,
                status: Some(answer.outcome.status()),
                outcome: Some(answer.outcome),
                did,
            });
        }
    }
    Ok(attempts)
}
