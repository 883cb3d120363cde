//! The arguments of the commands on the wire: `serve`, `probe` and `challenge`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::connection::ConnectArgs;
use crate::http::caller::KeyScope;
use crate::limits;
use crate::probe::Mode;
use crate::race::DEFAULT_STRATEGY;
use crate::race::options::RaceInput;
use crate::race::options::{
    AppInput, FingerprintInput, GuardInput, HangUpInput, LoserInput, StandbyInput, StoreInput,
    StrategyInput, TransactionInput,
};
use crate::strategy::StrategyKind;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The database engine the app's awards are decided on: PostgreSQL,
    /// or MariaDB (InnoDB) in a disposable server of idem's own.
    #[arg(long, value_enum, default_value_t = crate::race::engine::Engine::Postgres)]
    pub engine: crate::race::engine::Engine,

    #[arg(long, short = 's', value_enum,
          help = super::values::with_default("The guard shape the app runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,

    /// Where to listen: an address and port (port 0 takes a free one).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,

    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::REPLICAS.parser(),
          help = limits::REPLICAS.help(
              "Run the app as N processes, each with its own pool and threads; the \
               listening port hands each new connection to the next in turn."))]
    pub replicas: Option<u64>,

    #[arg(long, value_enum, value_name = "SCOPE",
          help = super::values::with_default(
              "Whose an idempotency key is: everyone's (a caller sending another's key gets \
               the other's stored response), or each caller's own, the caller being its \
               Authorization header.",
              KeyScope::Global.name()))]
    pub key_scope: Option<KeyScope>,

    #[command(flatten)]
    pub hang_up: HangUpInput,

    #[command(flatten)]
    pub guard_shape: StrategyInput,

    #[command(flatten)]
    pub app: AppInput,

    #[command(flatten)]
    pub losers: LoserInput,

    #[command(flatten)]
    pub fingerprints: FingerprintInput,

    #[command(flatten)]
    pub store: StoreInput,

    #[command(flatten)]
    pub guard: GuardInput,

    #[command(flatten)]
    pub transaction: TransactionInput,

    #[command(flatten)]
    pub standby: StandbyInput,

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

    /// Once listening, write a plan for `idem probe --plan` to this file:
    /// the award endpoint, counted in this app's tables.
    #[arg(long, value_name = "FILE")]
    pub write_plan: Option<PathBuf>,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl ServeArgs {
    /// What the flags say, for the one builder: the app's requests come
    /// over HTTP, as in `race --http`.
    pub fn input(&self) -> RaceInput {
        RaceInput {
            strategy: self.guard_shape.clone(),
            app: self.app.clone(),
            losers: self.losers.clone(),
            fingerprints: self.fingerprints.clone(),
            store: self.store.clone(),
            guard: self.guard.clone(),
            transaction: self.transaction.clone(),
            standby: self.standby.clone(),
            hang_up: self.hang_up.clone(),
            ..RaceInput::default()
        }
        .with(|r| {
            r.strategy.strategy = self.strategy;
            r.wire.http = true;
            r.wire.replicas = self.replicas;
            r.shape.key_scope = self.key_scope;
        })
    }
}

/// What bounds the app's clients: their time and how many connect at once.
#[derive(Debug, Clone, Args)]
pub struct ServeLimitFlags {
    /// How long a client may take to send a request's headers, and again
    /// its body (a stalled body is answered 408).
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = limits::READ_TIMEOUT_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::READ_TIMEOUT_MS.parser())]
    pub read_timeout_ms: u64,

    /// How long a connection may sit idle before the app closes it.
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = limits::IDLE_TIMEOUT_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::IDLE_TIMEOUT_MS.parser())]
    pub idle_timeout_ms: u64,

    /// How many connections may be open at once (fewer if the descriptor
    /// limit, ulimit -n, allows fewer); past it a new one is answered 503.
    #[arg(help_heading = "Limits")]
    #[arg(long, default_value_t = limits::MAX_CONNECTIONS.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = limits::MAX_CONNECTIONS.parser())]
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

    /// Count the effects with any command instead, for effects outside
    /// PostgreSQL (a queue, another service's log): run by sh before and
    /// after, it prints one whole number; bounded by --count-timeout-ms
    /// and 4 KiB of output.
    #[arg(long, value_name = "CMD", conflicts_with = "count_sql")]
    pub count_cmd: Option<String>,

    /// Play the downstream service the API calls for its side effect (a
    /// payment provider, a mailer): listen on ADDR (e.g. 127.0.0.1:9090),
    /// answer every call, and count the calls as the effects.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["count_sql", "count_cmd"])]
    pub sink: Option<std::net::SocketAddr>,

    /// The status the sink answers each call with.
    #[arg(long, value_name = "CODE", default_value_t = 200, requires = "sink",
          value_parser = clap::value_parser!(u16).range(200..=599))]
    pub sink_status: u16,

    /// How long the sink takes to answer each call, in ms.
    #[arg(long, value_name = "MS", default_value_t = 0, requires = "sink",
          value_parser = limits::SINK_DELAY_MS.parser())]
    pub sink_delay_ms: u64,

    /// How long connecting and each count may take; past it the query is
    /// cancelled on the server (the command killed).
    #[arg(long, default_value_t = limits::COUNT_TIMEOUT_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::COUNT_TIMEOUT_MS.parser())]
    pub count_timeout_ms: u64,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The endpoint, e.g. http://127.0.0.1:8080/lessons/1/complete.
    #[arg(required_unless_present = "plan")]
    pub url: Option<String>,

    /// Probe every endpoint a plan file names, in turn, and end with one
    /// summary (see docs/ci.md); the other flags then go in the plan.
    #[arg(long, value_name = "FILE", conflicts_with = "url")]
    pub plan: Option<PathBuf>,

    /// Before the first request, wait until the endpoint's server answers
    /// anything over HTTP, for at most this long (a service still starting
    /// in CI); one that never does ends the probe with status 4.
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::WAIT_FOR_MS.parser())]
    pub wait_for_ms: Option<u64>,

    /// A report for a CI system, once every case is judged:
    /// junit:PATH (JUnit XML) or github (a step summary and annotations);
    /// may be given more than once.
    #[arg(long, value_name = "junit:PATH|github", value_parser = ReportTo::parse)]
    pub report: Vec<ReportTo>,

    #[arg(long, short = 'n', value_name = "N",
          allow_negative_numbers = true, value_parser = limits::PROBE_REQUESTS.parser(),
          help = limits::PROBE_REQUESTS.help(
              "How many identical requests to send at once (with --retry-at, first: 1 unless given)."))]
    pub requests: Option<u64>,

    /// The Idempotency-Key every request carries [default: a random UUID,
    /// a fresh one for each burst].
    #[arg(long, short = 'k', value_name = "KEY")]
    pub key: Option<String>,

    /// Send R bursts, a fresh key each (unless --key), and report in how
    /// many the guard let duplicates through.
    #[arg(long, default_value_t = limits::PROBE_RUNS.default(), value_name = "R",
          allow_negative_numbers = true, value_parser = limits::PROBE_RUNS.parser())]
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

    /// With --conformance: a header that makes a second caller (e.g. its
    /// `Authorization: Bearer ...`), in place of the same header of
    /// --header; repeat for more. Without it the "another caller" case is n/a.
    #[arg(long, value_name = "NAME: VALUE")]
    pub other_caller: Vec<String>,

    /// With --conformance: a second endpoint of the API, for the "another
    /// endpoint" case (the same key sent there must not get this
    /// endpoint's stored response); in a plan, the next endpoint's URL.
    #[arg(long, value_name = "URL", requires = "conformance")]
    pub other_url: Option<String>,

    /// The most of each answer's body that is read; a longer one is
    /// reported for its request, and the probe goes on.
    #[arg(long, default_value_t = limits::MAX_RESPONSE_BYTES.default(), value_name = "BYTES",
          allow_negative_numbers = true, value_parser = limits::MAX_RESPONSE_BYTES.parser())]
    pub max_response_bytes: u64,

    /// How HTTP/1.1 requests are released (HTTP/2 always goes in one packet).
    #[arg(long, value_enum, default_value_t = Mode::LastByte, value_name = "MODE")]
    pub release: Mode,

    #[command(flatten)]
    pub reach: ReachFlags,

    /// How long the whole probe may take, in ms.
    #[arg(long, default_value_t = limits::PROBE_TIMEOUT_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::PROBE_TIMEOUT_MS.parser())]
    pub timeout_ms: u64,

    #[command(flatten)]
    pub count: CountFlags,

    /// Check the IETF draft's cases one by one: missing key, same key with
    /// another body, concurrent requests, a retry after completion, the
    /// same key while the first request is in flight (with the same body
    /// and with another), and another caller's request with the same key.
    #[arg(long)]
    pub conformance: bool,

    /// Send the request, then the same request again at each of these
    /// offsets from its send (e.g. 50ms,300ms,2s), each on a connection of
    /// its own, and judge by the effects left for the key: more than one is
    /// a duplicate (a claim that expired while its work still ran).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = limits::duration,
          conflicts_with = "conformance", requires = "count_sql")]
    pub retry_at: Vec<Duration>,

    /// With --conformance: send the in-flight cases' second request this
    /// long after the first [default: half the latency of a request the
    /// probe times first].
    #[arg(long, value_name = "MS", requires = "conformance", allow_negative_numbers = true,
          value_parser = limits::IN_FLIGHT_MS.parser())]
    pub in_flight_ms: Option<u64>,

    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          default_value_t = limits::SETTLE_MS.default(), value_parser = limits::SETTLE_MS.parser(),
          help = "With --conformance: how long the \"after an abort\" case retries a key that \
                  answers 409 before it calls the key stuck")]
    pub settle_ms: u64,

    /// One JSON object with every figure.
    #[arg(long)]
    pub json: bool,
}

/// Where `--report` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportTo {
    /// JUnit XML, to this file.
    Junit(PathBuf),
    /// GitHub Actions: `GITHUB_STEP_SUMMARY` and `::error` annotations.
    Github,
}

impl ReportTo {
    fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            Some(("junit", path)) if !path.is_empty() => Ok(ReportTo::Junit(PathBuf::from(path))),
            None if text == "github" => Ok(ReportTo::Github),
            _ => Err("give junit:PATH or github".to_string()),
        }
    }
}

/// A language the challenge has a starting point in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Starter {
    Ruby,
}

#[derive(Debug, Args)]
pub struct ChallengeArgs {
    /// Judge a guard in any language over HTTP: the endpoint of the
    /// course's award (e.g. http://127.0.0.1:4567/lessons/1/complete).
    #[arg(long, value_name = "URL", requires = "count_sql")]
    pub url: Option<String>,

    /// Write the challenge's starting point in LANGUAGE (ruby: app.rb, the
    /// course's award guarded the naive way) into the current folder,
    /// never over a file, and print how to run and judge it.
    #[arg(long, value_name = "LANGUAGE", value_enum, conflicts_with = "url")]
    pub starter: Option<Starter>,

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

/// One app replica, started by `serve --replicas` or `race --http
/// --replicas` (not for people: the parent talks to it on stdin and stdout).
#[derive(Debug, Args)]
pub struct ReplicaArgs {
    /// This replica's number, from 1.
    #[arg(long)]
    pub number: usize,

    /// The parent run's schema, which the replica proves is idem's and
    /// works in, and never drops.
    #[arg(long)]
    pub schema: String,

    /// The race's settings, as JSON (the fields of a scenario's `[race]`).
    #[arg(long)]
    pub input: String,

    /// The bounds on its clients, as `serve` was given them.
    #[command(flatten)]
    pub limits: ServeLimitFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}
