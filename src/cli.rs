//! Every command-line argument idem takes, and nothing else.
//!
//! These are the "low" arguments, as close to the flags as can be; the
//! commands turn them into typed settings (`RaceSettings`) before any work.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::db::{ClusterOptions, ConnectOptions};
use crate::keys::{CrashPoint, DEFAULT_CRASH_AT, DEFAULT_KEYS_WORK_MS, KeyKind};
use crate::race::fault::FaultPoint;
use crate::race::input::RaceInput;
use crate::race::limits::{self, Origin};
use crate::race::{
    CrashPlan, DEFAULT_KEY, DEFAULT_ON_FAILURE, DEFAULT_STORE, DEFAULT_STRATEGY, RaceSettings,
};
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::{LoserKind, StrategyKind};

/// See why idempotency guards fail under concurrency: real races, real PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "idem", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// When to colour the output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The seven lessons, one line each.
    Lessons,
    /// Tell one lesson and run its demonstrations live.
    Lesson(LessonArgs),
    /// All seven lessons in order.
    Tour(TourArgs),
    /// Race N workers on one key with one strategy and count the rows (lessons 1 and 2).
    Race(RaceArgs),
    /// Run every strategy under the same settings and show them side by side.
    Compare(CompareArgs),
    /// Drive the interleaving step by step, by hand or with --schedule.
    Step(StepArgs),
    /// List or run the scenario files, each checked against its expected figures.
    Scenario(ScenarioArgs),
    /// Clients that crash and retry with random or derived keys (lesson 6).
    Keys(KeysArgs),
    /// The key table and the Solid-Cache-like store, measured side by side (lesson 5).
    Stores(StoresArgs),
    /// What each store still knows about a key in a kept schema (lesson 5).
    Audit(AuditArgs),
    /// Delete completed keys past their retention (lesson 5).
    Reap(ReapArgs),
    /// Judge idem's own guard with the challenge's races (lesson 7); yours in
    /// Rust: `cargo run --example challenge`; in any language: --url.
    Challenge(ChallengeArgs),
    /// Serve the course's app over HTTP: POST /lessons/{lesson}/complete with an Idempotency-Key.
    Serve(ServeArgs),
    /// Race N identical requests with one Idempotency-Key at any HTTP API and count the effects.
    Probe(ProbeArgs),
    /// Show which PostgreSQL idem uses and how long its cluster takes to start and stop.
    Doctor(DoctorArgs),
    /// Measure cluster start-up, race rate, guard throughput, hot key and scale (BENCHMARKS.md).
    Bench(BenchArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is not set.
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether the user forced colour on or off; `None` leaves it to the output.
    pub fn forced(self) -> Option<bool> {
        match self {
            ColorChoice::Auto => None,
            ColorChoice::Always => Some(true),
            ColorChoice::Never => Some(false),
        }
    }
}

/// Where the tables live.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Database")]
pub struct ConnectArgs {
    /// A PostgreSQL server to use instead of a disposable cluster. idem works
    /// in a schema of its own (idem_<run id>) and drops it at the end.
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    /// Directory holding PostgreSQL's `initdb` and `postgres` (found if not given).
    #[arg(long, global = true, env = "IDEM_PG_BIN", value_name = "DIR")]
    pub pg_bin: Option<PathBuf>,

    /// The user the disposable cluster runs as when idem runs as root [default: postgres].
    #[arg(long, global = true, env = "IDEM_PG_USER", value_name = "NAME")]
    pub pg_user: Option<String>,

    /// Keep the run's schema on the server (with --database-url) and print its name.
    #[arg(long, global = true)]
    pub keep: bool,
}

/// A schema an earlier run kept (`audit`, `reap`).
#[derive(Debug, Clone, Args)]
pub struct KeptSchemaArgs {
    /// A schema kept by an earlier run with --keep (needs --database-url).
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Option<String>,
}

impl ConnectArgs {
    pub fn options(&self) -> ConnectOptions {
        ConnectOptions {
            database_url: self.database_url.clone(),
            cluster: ClusterOptions {
                pg_bin: self.pg_bin.clone(),
                pg_user: self.pg_user.clone(),
                ..ClusterOptions::default()
            },
            keep: self.keep,
            schema: None,
        }
    }
}

/// The settings every race takes, for `race` and `compare` alike, in the
/// groups the help shows.
#[derive(Debug, Clone, Args)]
pub struct RaceFlags {
    #[command(flatten)]
    pub shape: ShapeFlags,

    #[command(flatten)]
    pub app: AppFlags,

    #[command(flatten)]
    pub losers: LoserFlags,

    #[command(flatten)]
    pub amounts: AmountFlags,

    #[command(flatten)]
    pub fingerprints: FingerprintFlags,

    #[command(flatten)]
    pub stores: StoreFlags,

    #[command(flatten)]
    pub eviction: EvictionFlags,

    #[command(flatten)]
    pub guard: GuardFlags,

    #[command(flatten)]
    pub faults: FaultFlags,

    #[command(flatten)]
    pub show: ShowFlags,
}

/// The race's shape: how many workers, which key, how many runs, which transport.
#[derive(Debug, Clone, Args)]
pub struct ShapeFlags {
    /// Concurrent workers, each one request with the same key.
    #[arg(long, short = 'w', default_value_t = limits::WORKERS.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = whole::<{ limits::WORKERS.min }, { limits::WORKERS.max }>)]
    pub workers: u64,

    /// The idempotency key every worker sends.
    #[arg(long, short = 'k', default_value = DEFAULT_KEY, value_name = "KEY")]
    pub key: String,

    /// Repeat the race R times on fresh tables and show the distribution.
    #[arg(long, short = 'r', default_value_t = limits::RUNS.default(), value_name = "R",
          allow_negative_numbers = true, value_parser = whole::<{ limits::RUNS.min }, { limits::RUNS.max }>)]
    pub runs: u64,

    /// Race over the wire: start the course's app (`idem serve`) on a
    /// loopback port and send each worker's request as a real HTTP client
    /// on its own connection. The outcomes are the statuses on the wire.
    #[arg(long)]
    pub http: bool,
}

/// The app the workers call: its connection pool, its work, its threads.
#[derive(Debug, Clone, Args)]
pub struct AppFlags {
    /// Connections in the pool the workers share (the app's connection pool).
    #[arg(long, short = 'p', default_value_t = limits::POOL_SIZE.default(), value_name = "P",
          allow_negative_numbers = true, value_parser = whole::<{ limits::POOL_SIZE.min }, { limits::POOL_SIZE.max }>)]
    pub pool_size: u64,

    /// Do not let the runner hold a connection during the race (by default it
    /// holds one, as the app's main thread does in the course).
    #[arg(long)]
    pub no_runner_connection: bool,

    /// How long the work takes, in ms: the service call behind the XP row,
    /// which keeps the race window open. 0 shows the bare race.
    #[arg(long, default_value_t = limits::WORK_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<{ limits::WORK_MS.min }, { limits::WORK_MS.max }>)]
    pub work_ms: u64,

    /// How long a worker waits for a free connection before giving up (503).
    #[arg(long, default_value_t = limits::CHECKOUT_TIMEOUT_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<{ limits::CHECKOUT_TIMEOUT_MS.min }, { limits::CHECKOUT_TIMEOUT_MS.max }>)]
    pub checkout_timeout_ms: u64,

    /// Over HTTP: how many requests the app handles at once, as an app
    /// server's threads do (the course's app has five).
    #[arg(long, default_value_t = limits::THREADS.default(), value_name = "T",
          allow_negative_numbers = true, value_parser = whole::<{ limits::THREADS.min }, { limits::THREADS.max }>)]
    pub threads: u64,
}

/// Lesson 3: what a request that loses the claim does.
#[derive(Debug, Clone, Args)]
pub struct LoserFlags {
    /// What a request that loses the claim does while the winner works
    /// (claim-work-complete only) [default: fail-fast].
    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_enum, value_name = "POLICY")]
    pub loser: Option<LoserKind>,

    /// With --loser poll: how often a loser re-reads the claim [default: 5].
    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = whole::<{ limits::POLL_MS.min }, { limits::POLL_MS.max }>)]
    pub poll_ms: Option<u64>,

    /// With --loser poll or block: how long a loser waits for the winner before answering 409 [default: 2000].
    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = whole::<{ limits::WAIT_TIMEOUT_MS.min }, { limits::WAIT_TIMEOUT_MS.max }>)]
    pub wait_timeout_ms: Option<u64>,
}

/// Lesson 4: what the workers ask for.
#[derive(Debug, Clone, Args)]
pub struct AmountFlags {
    /// Per-worker XP amounts, all on one key: worker i asks for the i-th (e.g. 10,20,10,30,10).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = amount)]
    pub amounts: Option<Vec<i32>>,
}

/// Lesson 4: whether the guard checks what a request asks for.
#[derive(Debug, Clone, Args)]
pub struct FingerprintFlags {
    /// Store no request fingerprint and check none: a reused key silently
    /// replays the first request's result (the wrong answer of lesson 4).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long)]
    pub no_fingerprint: bool,
}

/// Lesson 5: where the claims live, and what the store remembers.
#[derive(Debug, Clone, Args)]
pub struct StoreFlags {
    /// Where claim-work-complete keeps its claims: the key table, or a
    /// Solid-Cache-like store (lesson 5).
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, default_value_t = DEFAULT_STORE)]
    pub store: StoreKind,

    /// The cache store's entry limit; past it the oldest entries are evicted.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, default_value_t = limits::CACHE_MAX_ENTRIES.default(), value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<{ limits::CACHE_MAX_ENTRIES.min }, { limits::CACHE_MAX_ENTRIES.max }>)]
    pub cache_max_entries: u64,

    /// The cache store's age limit (e.g. 90s, 24h, 2w) [default: 2w].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub cache_max_age: Option<Duration>,
}

/// Lesson 5: what the race does to the store afterwards, and what it shows.
#[derive(Debug, Clone, Args)]
pub struct EvictionFlags {
    /// After the race, write N other keys to the cache, then retry the same
    /// request: does its claim survive eviction?
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, default_value_t = limits::CACHE_PRESSURE.default(), value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<{ limits::CACHE_PRESSURE.min }, { limits::CACHE_PRESSURE.max }>)]
    pub cache_pressure: u64,

    /// After the race, show what each store can still tell about the key.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long)]
    pub audit: bool,
}

/// Lesson 7: how the guard recovers.
#[derive(Debug, Clone, Args)]
pub struct GuardFlags {
    /// The guard takes over a pending claim older than this, in ms.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, default_value_t = limits::LOCK_TIMEOUT_MS.default(), value_name = "MS", allow_negative_numbers = true,
          value_parser = whole::<{ limits::LOCK_TIMEOUT_MS.min }, { limits::LOCK_TIMEOUT_MS.max }>)]
    pub lock_timeout_ms: u64,

    /// What the guard does when the work fails: store the 500 and replay it
    /// (Stripe), or release the claim so a retry runs again (Powertools).
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_enum, default_value_t = DEFAULT_ON_FAILURE)]
    pub on_failure: OnFailure,
}

/// Lesson 7: faults on purpose.
#[derive(Debug, Clone, Args)]
pub struct FaultFlags {
    /// Crash on purpose: the connection of the first worker to reach POINT
    /// (or of worker N only) dies, and the worker with it; after the lock
    /// timeout its request is retried. POINT: after-claim, during-work,
    /// before-complete. E.g. --crash after-claim, --crash worker=2,at=during-work.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "[worker=N,]at=POINT", value_parser = crash_plan)]
    pub crash: Option<CrashPlan>,

    /// Have another session terminate the connection of the first worker to
    /// start its work, halfway through it; the worker itself lives on.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long)]
    pub kill_connection: bool,

    /// Make worker N's work fail (the award service errors), then retry it.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole::<{ limits::FAIL_WORK.min }, { limits::FAIL_WORK.max }>)]
    pub fail_work: Option<u64>,

    /// How many retries of a crashed or failed request are sent at once.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, default_value_t = limits::RECOVERY_RETRIES.default(), value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<{ limits::RECOVERY_RETRIES.min }, { limits::RECOVERY_RETRIES.max }>)]
    pub recovery_retries: u64,
}

/// What to show besides the figures.
#[derive(Debug, Clone, Args)]
pub struct ShowFlags {
    /// Draw each worker's steps on a timeline (one race only).
    #[arg(long)]
    pub trace: bool,

    /// With the timeline, the statement each step sent and, for
    /// check-then-store and claim-work-complete, the line of the course's
    /// Rails code it stands for (implies --trace).
    #[arg(long)]
    pub sql: bool,

    /// Write the race's timeline as a page to open in a browser: a lane per
    /// worker, a bar per step with its SQL, lock waits as arrows (one race only).
    #[arg(long, value_name = "FILE.html")]
    pub timeline: Option<std::path::PathBuf>,

    /// Write the race's steps in the Chrome Trace Event format, for
    /// Perfetto or chrome://tracing (one race only).
    #[arg(long, value_name = "FILE")]
    pub trace_json: Option<std::path::PathBuf>,

    /// Print one JSON object per race (JSON Lines) and nothing else on stdout.
    #[arg(long)]
    pub json: bool,
}

impl RaceFlags {
    /// What the flags say, for the one builder.
    pub fn input(&self, strategy: StrategyKind) -> RaceInput {
        RaceInput {
            workers: Some(self.shape.workers),
            key: Some(self.shape.key.clone()),
            http: Some(self.shape.http),
            amounts: self.amounts.amounts.clone(),
            cache_pressure: Some(self.eviction.cache_pressure),
            crash: self.faults.crash,
            kill_connection: Some(self.faults.kill_connection),
            fail_work: self.faults.fail_work,
            recovery_retries: Some(self.faults.recovery_retries),
            ..app_input(
                strategy,
                &self.app,
                &self.losers,
                &self.fingerprints,
                &self.stores,
                &self.guard,
            )
        }
    }

    /// The checked settings for one strategy.
    pub fn settings(&self, strategy: StrategyKind) -> Result<RaceSettings> {
        self.input(strategy).build(Origin::Flags)
    }
}

/// What the flags that shape the app say: everything but the clients and the faults.
fn app_input(
    strategy: StrategyKind,
    app: &AppFlags,
    losers: &LoserFlags,
    fingerprints: &FingerprintFlags,
    stores: &StoreFlags,
    guard: &GuardFlags,
) -> RaceInput {
    RaceInput {
        strategy: Some(strategy),
        pool_size: Some(app.pool_size),
        runner_holds_connection: Some(!app.no_runner_connection),
        work_ms: Some(app.work_ms),
        checkout_timeout_ms: Some(app.checkout_timeout_ms),
        threads: Some(app.threads),
        loser: losers.loser,
        poll_ms: losers.poll_ms,
        wait_timeout_ms: losers.wait_timeout_ms,
        fingerprint: Some(!fingerprints.no_fingerprint),
        store: Some(stores.store),
        cache_max_entries: Some(stores.cache_max_entries),
        cache_max_age: stores.cache_max_age,
        lock_timeout_ms: Some(guard.lock_timeout_ms),
        on_failure: Some(guard.on_failure),
        ..RaceInput::default()
    }
}

/// Parses a whole number in `MIN..=MAX`, saying plainly what is wrong.
fn whole<const MIN: u64, const MAX: u64>(text: &str) -> Result<u64, String> {
    let range = format!("a whole number from {MIN} to {MAX}");
    match text.trim().parse::<i128>() {
        Ok(n) if n < 0 => Err(format!("it is negative; give {range}")),
        Ok(n) if n < i128::from(MIN) || n > i128::from(MAX) => Err(format!("give {range}")),
        Ok(n) => Ok(n as u64),
        Err(_) => Err(format!("not a number; give {range}")),
    }
}

/// Parses a duration: a whole number and a unit, ms, s, m, h, d or w (e.g. 90s, 24h, 2w).
pub fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 90s, 15m, 24h or 2w"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(number)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "{text:?} has no known unit; use ms, s, m, h, d or w"
            ));
        }
    };
    number
        .checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Parses `worker=N,at=POINT`.
fn crash_plan(text: &str) -> Result<CrashPlan, String> {
    let point = |name: &str| {
        FaultPoint::from_str(name.trim(), true).map_err(|_| {
            format!("unknown crash point {name:?}; use after-claim, during-work or before-complete")
        })
    };
    let (mut worker, mut at) = (None, None);
    for part in text.split(',') {
        match part.trim().split_once('=') {
            Some(("worker", _)) if worker.is_some() => {
                return Err("worker= is given twice; name one worker".into());
            }
            Some(("worker", n)) => {
                worker = Some(
                    whole::<{ limits::CRASH_WORKER.min }, { limits::CRASH_WORKER.max }>(n)?
                        as usize,
                )
            }
            Some(("at", _)) if at.is_some() => {
                return Err("the crash point is given twice; name one".into());
            }
            None if at.is_some() && point(part).is_ok() => {
                return Err("the crash point is given twice; name one".into());
            }
            Some(("at", name)) => at = Some(point(name)?),
            None if point(part).is_ok() => at = Some(point(part)?),
            _ => return Err(format!("{part:?} is not worker=N or at=POINT")),
        }
    }
    match at {
        Some(at) => Ok(CrashPlan { worker, at }),
        None => Err("say where, e.g. at=after-claim or worker=2,at=during-work".into()),
    }
}

/// Parses one XP amount: a whole number from 1 to 1,000,000.
fn amount(text: &str) -> Result<i32, String> {
    whole::<{ limits::AMOUNT.min }, { limits::AMOUNT.max }>(text).map(|n| n as i32)
}

#[derive(Debug, Args)]
pub struct RaceArgs {
    /// The guard shape every worker runs.
    #[arg(long, short = 's', value_enum, default_value_t = DEFAULT_STRATEGY)]
    pub strategy: StrategyKind,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The guard shape the app runs.
    #[arg(long, short = 's', value_enum, default_value_t = DEFAULT_STRATEGY)]
    pub strategy: StrategyKind,

    /// Where to listen: an address and port (port 0 takes a free one).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,

    #[command(flatten)]
    pub app: AppFlags,

    #[command(flatten)]
    pub losers: LoserFlags,

    #[command(flatten)]
    pub fingerprints: FingerprintFlags,

    #[command(flatten)]
    pub stores: StoreFlags,

    #[command(flatten)]
    pub guard: GuardFlags,

    #[command(flatten)]
    pub limits: ServeLimitFlags,

    /// Serve HTTPS with this PEM certificate chain (and --tls-key); HTTP/2
    /// is offered beside HTTP/1.1.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Print the ready line as a JSON object (with `url` and `schema`) and
    /// no request log.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl ServeArgs {
    /// What the flags say, for the one builder.
    pub fn input(&self) -> RaceInput {
        app_input(
            self.strategy,
            &self.app,
            &self.losers,
            &self.fingerprints,
            &self.stores,
            &self.guard,
        )
    }
}

/// What bounds the app's clients: their time and how many connect at once.
#[derive(Debug, Clone, Args)]
pub struct ServeLimitFlags {
    /// How long a client may take to send a request's headers, and again
    /// its body (a stalled body is answered 408).
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = crate::http::listener::DEFAULT_READ_TIMEOUT_MS, value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<1, 3_600_000>)]
    pub read_timeout_ms: u64,

    /// How long a connection may sit idle before the app closes it.
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = crate::http::listener::DEFAULT_IDLE_TIMEOUT_MS, value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<1, 3_600_000>)]
    pub idle_timeout_ms: u64,

    /// How many connections may be open at once (fewer if the descriptor
    /// limit, ulimit -n, allows fewer); past it a new one is answered 503.
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = crate::http::listener::DEFAULT_MAX_CONNECTIONS as u64, value_name = "N",
          allow_negative_numbers = true, value_parser = whole::<1, 1_000_000>)]
    pub max_connections: u64,
}

impl ServeLimitFlags {
    pub fn limits(&self) -> crate::http::listener::Limits {
        crate::http::listener::Limits {
            read_timeout: Duration::from_millis(self.read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections as usize,
        }
    }
}

/// How a client reaches an HTTP service: TLS trust and the protocol.
#[derive(Debug, Clone, Args)]
pub struct ReachFlags {
    /// Trust the CA certificates in this PEM file instead of the system's (https).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "insecure",
        help_heading = "Reaching the service"
    )]
    pub cacert: Option<PathBuf>,

    /// Do not check the server's certificate (https); the output says so.
    #[arg(long, help_heading = "Reaching the service")]
    pub insecure: bool,

    /// Insist on HTTP/2, through TLS's ALPN (https); all requests go as
    /// streams of one connection, released in one packet.
    #[arg(
        long,
        conflicts_with = "http1_1",
        help_heading = "Reaching the service"
    )]
    pub http2: bool,

    /// Speak HTTP/2 over cleartext from the first byte (h2c, http:// URLs).
    #[arg(long, conflicts_with_all = ["http1_1", "http2"], help_heading = "Reaching the service")]
    pub http2_prior_knowledge: bool,

    /// Offer only HTTP/1.1 in ALPN (https): one connection per request.
    #[arg(
        long = "http1.1",
        id = "http1_1",
        help_heading = "Reaching the service"
    )]
    pub http1_1: bool,
}

impl ReachFlags {
    pub fn reach(&self) -> crate::http::client::Reach {
        use crate::http::client::{Offer, Reach, Trust};
        let trust = match (&self.cacert, self.insecure) {
            (_, true) => Trust::Nothing,
            (Some(file), false) => Trust::CaFile(file.clone()),
            (None, false) => Trust::System,
        };
        let offer = match (self.http2 || self.http2_prior_knowledge, self.http1_1) {
            (true, _) => Offer::Http2,
            (false, true) => Offer::Http11,
            (false, false) => Offer::Both,
        };
        Reach {
            trust,
            offer,
            prior_knowledge: self.http2_prior_knowledge,
        }
    }
}

/// How HTTP/1.1 requests leave together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReleaseFlag {
    /// Each request sent but its final byte, then every final byte from one loop.
    LastByte,
    /// Whole requests, each sent by its own task when the gate opens.
    Whole,
}

/// Where effects are counted: a query and the database it runs on.
#[derive(Debug, Clone, Args)]
pub struct CountFlags {
    /// A query returning one number: the effects so far (e.g. `SELECT
    /// count(*) FROM payments`). Run before and after, read-only.
    #[arg(long, value_name = "SQL", requires = "count_database_url")]
    pub count_sql: Option<String>,

    /// The database --count-sql runs on (its password is never printed).
    #[arg(long, value_name = "URL", requires = "count_sql")]
    pub count_database_url: Option<String>,

    /// How long connecting and each count may take; past it the query is
    /// cancelled on the server.
    #[arg(long, default_value_t = crate::probe::count::DEFAULT_COUNT_TIMEOUT_MS, value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<1, 3_600_000>)]
    pub count_timeout_ms: u64,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The endpoint, e.g. http://127.0.0.1:8080/lessons/1/complete.
    pub url: String,

    /// How many identical requests to send at once.
    #[arg(long, short = 'n', default_value_t = 5, value_name = "N",
          allow_negative_numbers = true, value_parser = whole::<1, 1000>)]
    pub requests: u64,

    /// The Idempotency-Key every request carries [default: a random UUID,
    /// a fresh one for each burst].
    #[arg(long, short = 'k', value_name = "KEY")]
    pub key: Option<String>,

    /// Send R bursts, a fresh key each (unless --key), and report in how
    /// many the guard let duplicates through.
    #[arg(long, default_value_t = 1, value_name = "R",
          allow_negative_numbers = true, value_parser = whole::<1, 100_000>)]
    pub runs: u64,

    /// The HTTP method.
    #[arg(long, short = 'X', default_value = "POST", value_name = "METHOD")]
    pub method: String,

    /// A header for every request, `Name: value`; repeat for more.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// The body, or @FILE to read it from a file.
    #[arg(long, short = 'd', value_name = "BODY|@FILE")]
    pub data: Option<String>,

    /// With --conformance: the body of the "same key, different body" case
    /// [default: the body with its first number changed].
    #[arg(long, value_name = "BODY|@FILE")]
    pub other_data: Option<String>,

    /// The most of each answer's body that is read; a longer one is
    /// reported for its request, and the probe goes on.
    #[arg(long, default_value_t = crate::http::client::DEFAULT_MAX_RESPONSE_BYTES as u64, value_name = "BYTES",
          allow_negative_numbers = true, value_parser = whole::<1, 1_073_741_824>)]
    pub max_response_bytes: u64,

    /// How HTTP/1.1 requests are released (HTTP/2 always goes in one packet).
    #[arg(long, value_enum, default_value_t = ReleaseFlag::LastByte, value_name = "MODE")]
    pub release: ReleaseFlag,

    #[command(flatten)]
    pub reach: ReachFlags,

    /// How long the whole probe may take, in ms.
    #[arg(long, default_value_t = 30_000, value_name = "MS",
          allow_negative_numbers = true, value_parser = whole::<1, 3_600_000>)]
    pub timeout_ms: u64,

    #[command(flatten)]
    pub count: CountFlags,

    /// Check the IETF draft's cases one by one: missing key, same key with
    /// another body, concurrent requests, a retry after completion.
    #[arg(long)]
    pub conformance: bool,

    /// One JSON object with every figure.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Compare the loser policies of claim-work-complete instead of the strategies.
    #[arg(long)]
    pub losers: bool,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the findings as one JSON object.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A small run (a few samples, 50 races per strategy) that proves the bench works.
    #[arg(long)]
    pub quick: bool,

    /// Measure only these sections (repeat the flag, or separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SECTION")]
    pub only: Vec<BenchSection>,

    /// Print the whole report as one JSON object.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// The sections of `idem bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchSection {
    /// Start and stop of the disposable cluster.
    Cluster,
    /// Default races back to back.
    Races,
    /// Whole `idem race` processes, cluster included.
    Process,
    /// idem's request loop against pgbench and the bare driver, same statements.
    Client,
    /// Every guard against the raw statement, at two pool sizes.
    Throughput,
    /// The guard through `idem serve`'s app against in-process.
    Wire,
    /// The probe's release modes: arrival spread at a loopback server.
    Release,
    /// Every request on one key at once.
    HotKey,
    /// Thousands of workers on one key.
    Scale,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// How clients make their keys; every kind side by side if not given.
    #[arg(long, value_enum)]
    pub kind: Option<KeyKind>,

    /// Run every key kind and print them side by side (the default without --kind).
    #[arg(long)]
    pub compare: bool,

    /// Clients, each a different user, running at once.
    #[arg(long, default_value_t = limits::CLIENTS.default(), value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<{ limits::CLIENTS.min }, { limits::CLIENTS.max }>)]
    pub clients: u64,

    /// Distinct awards each client makes (one per lesson). Two or more show
    /// what a key derived from too few fields does.
    #[arg(long, default_value_t = limits::INTENTS.default(), value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<{ limits::INTENTS.min }, { limits::INTENTS.max }>)]
    pub intents: u64,

    /// Retries after the first attempt; every attempt but the last crashes.
    #[arg(long, default_value_t = limits::RETRIES.default(), value_name = "R", allow_negative_numbers = true,
          value_parser = whole::<{ limits::RETRIES.min }, { limits::RETRIES.max }>)]
    pub retries: u64,

    /// Where each crashing attempt dies.
    #[arg(long, value_enum, default_value_t = DEFAULT_CRASH_AT)]
    pub crash_at: CrashPoint,

    /// The server checks no fingerprint: a merged intent is silently replayed, not rejected.
    #[arg(long)]
    pub no_fingerprint: bool,

    /// How long the server's work takes, in ms.
    #[arg(long, default_value_t = DEFAULT_KEYS_WORK_MS, value_name = "MS", allow_negative_numbers = true,
          value_parser = whole::<0, 60_000>)]
    pub work_ms: u64,

    /// Print one JSON object per key kind.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StoresArgs {
    /// Races per store for the claim race.
    #[arg(long, short = 'r', default_value_t = 20, value_name = "R", allow_negative_numbers = true,
          value_parser = whole::<1, 100_000>)]
    pub runs: u64,

    /// Concurrent workers in the claim race.
    #[arg(long, short = 'w', default_value_t = 5, value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<2, 1000>)]
    pub workers: u64,

    /// How long the work takes, in ms.
    #[arg(long, default_value_t = limits::WORK_MS.default(), value_name = "MS", allow_negative_numbers = true,
          value_parser = whole::<0, 60_000>)]
    pub work_ms: u64,

    /// The cache store's entry limit; the eviction test writes a tenth more.
    #[arg(long, default_value_t = 100, value_name = "N", allow_negative_numbers = true,
          value_parser = whole::<1, 1_000_000>)]
    pub cache_max_entries: u64,

    /// One JSON object per store.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The key to look up.
    #[arg(long, short = 'k', default_value = DEFAULT_KEY, value_name = "KEY")]
    pub key: String,

    #[command(flatten)]
    pub kept: KeptSchemaArgs,

    /// Print the audit as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Delete completed keys older than this (e.g. 24h, 72h, 3d).
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub older_than: Duration,

    /// Reap a kept schema; without it, idem seeds a fresh one with keys of
    /// several ages to show what the reaper takes.
    #[command(flatten)]
    pub kept: KeptSchemaArgs,

    /// Print what was reaped as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ChallengeArgs {
    /// Judge a guard in any language over HTTP: the endpoint of the
    /// course's award (e.g. http://127.0.0.1:4567/lessons/1/complete).
    #[arg(long, value_name = "URL", requires = "count_sql")]
    pub url: Option<String>,

    #[command(flatten)]
    pub count: CountFlags,

    #[command(flatten)]
    pub reach: ReachFlags,

    /// One JSON object per case.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StepArgs {
    /// The guard shape every worker runs.
    #[arg(long, short = 's', value_enum, default_value_t = StrategyKind::CheckThenStore)]
    pub strategy: StrategyKind,

    /// The order of steps, one worker number per step (e.g. 1,2,1,2):
    /// replays an interleaving without asking.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = whole::<1, 5>)]
    pub schedule: Option<Vec<u64>>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// List the scenarios (the built-in ones, or those in the files and folders named).
    List { paths: Vec<PathBuf> },
    /// Run scenarios and compare each with its expectations; exits 1 if any differs.
    Run {
        /// Scenario files or folders; the built-in ones if none.
        paths: Vec<PathBuf>,
        /// One JSON object per scenario.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct LessonArgs {
    /// The lesson, 1 to 7.
    #[arg(value_parser = whole::<1, 7>)]
    pub number: u64,

    /// Do not wait for Enter between screens (also when stdin is not a terminal).
    #[arg(long)]
    pub no_pause: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct TourArgs {
    /// Do not wait for Enter between screens (also when stdin is not a terminal).
    #[arg(long)]
    pub no_pause: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// The command line takes a domain type by the name its `name()` gives,
/// with one help line per value: clap knows the domain types from here,
/// and they know nothing of clap.
macro_rules! value_enum {
    ($ty:ty { $($variant:path => $help:literal),* $(,)? }) => {
        impl ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($variant),*]
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                let help = match self {
                    $($variant => $help,)*
                };
                Some(clap::builder::PossibleValue::new(self.name()).help(help))
            }
        }
    };
}

value_enum!(StrategyKind {
    StrategyKind::None => "The work with no key at all",
    StrategyKind::CheckThenStore =>
        "Find the key; if missing, do the work, then store the key (lesson 1)",
    StrategyKind::ClaimWorkComplete =>
        "Claim the key as pending, do the work, complete the claim (lesson 2)",
    StrategyKind::InsertUnique =>
        "The work is one INSERT ... ON CONFLICT DO NOTHING on the XP table",
    StrategyKind::Guard => "The whole guard: claim-work-complete with stale-claim takeover, \
        rescue of failed work and retry of transient failures (lesson 7)",
});

value_enum!(LoserKind {
    LoserKind::FailFast => "Answer 409 Conflict at once (Stripe, the IETF draft)",
    LoserKind::Poll =>
        "Give the connection back, re-read the claim every --poll-ms until it completes",
    LoserKind::Block => "Wait on the winner's lock, holding a connection, until it commits",
});

value_enum!(StoreKind {
    StoreKind::Table => "The `idempotency_keys` table with its unique index",
    StoreKind::Cache => "The `cache_entries` table, used as Solid Cache is",
});

value_enum!(OnFailure {
    OnFailure::Store => "Complete the claim with the 500 and replay it to retries (Stripe)",
    OnFailure::Release => "Delete the claim, so that a retry runs the work again (Powertools)",
});

value_enum!(KeyKind {
    KeyKind::Random => "A new UUIDv4 each time the client starts: lost with every crash",
    KeyKind::Derived =>
        "UUIDv5 of the operation, the user and the lesson: the same on every retry",
    KeyKind::DerivedCoarse => "UUIDv5 of the operation and the user only: too few fields, \
        so two different awards for the same user share a key",
});

value_enum!(CrashPoint {
    CrashPoint::BeforeSend => "Before the request leaves: the server never sees it",
    CrashPoint::AfterWork => "After the server did the work, before the response arrives",
    CrashPoint::AfterResponse =>
        "After the response arrived, before the client recorded it (a reload)",
});

value_enum!(FaultPoint {
    FaultPoint::AfterClaim => "After the claim (or the find), as the work is about to start",
    FaultPoint::DuringWork => "Halfway through the work, before its XP row is written",
    FaultPoint::BeforeComplete =>
        "After the work, as the claim is about to be completed (or the key stored)",
});
