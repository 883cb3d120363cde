//! The course's app over HTTP: `POST /lessons/{lesson}/complete`, answered by one strategy on a real pool with a fixed number of threads.
//!
//! A request is handled exactly as a race's worker handles it
//! ([`respond`]): the strategy, the lease of a pooled connection, the trace.
//! Only the edges are new: reading the key and the body off the wire, and
//! writing the answer back as a status, headers and a body.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::LengthLimitError;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::caller::KeyScope;
use super::contract::{
    self, KEY_HEADER, MAX_BODY_BYTES, PROBLEM_JSON, REPLAYED_HEADER, REPLICA_HEADER, WORKER_HEADER,
};
use crate::db::pool::{self, Workers};
use crate::db::statements::{Sends, Sql};
use crate::request::hang_up::HangUps;
use crate::request::service::ServiceCalls;
use crate::request::{Answer, Lease, Outcome, Params, Request, Trace};
use crate::strategy::{OPERATION, Strategy, respond};

/// `GET /counts`'s statement.
static COUNTS: Sql = Sql::new(
    "SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM experience_points),
            (SELECT count(*) FROM award_calls)",
    &[],
);

/// A response on its way out.
pub type Response = hyper::Response<Full<Bytes>>;

/// How the app handles every award, besides its strategy.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Whether requests are fingerprinted (and a mismatch answered 422).
    pub(crate) fingerprint: bool,
    /// How long the award's service call takes.
    pub(crate) work: Duration,
    /// How long a request waits for a pooled connection.
    pub(crate) checkout_timeout: Duration,
    /// The request (by its number) whose work fails, if any.
    pub(crate) fail_work: Option<usize>,
    /// Whether a key is the caller's own or everyone's.
    pub(crate) key_scope: KeyScope,
    /// What the app does with a request whose client went away.
    pub(crate) on_hangup: OnHangup,
}

/// What the app does when a request's client goes away before its answer
/// (`--on-hangup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnHangup {
    /// Drop the request at its next await, as hyper (and axum, and Go with
    /// a cancelled context) do: what it has not done stays undone.
    #[default]
    Cancel,
    /// Run it to its end anyway, as Puma and Node do: nobody reads the answer.
    Finish,
}

impl OnHangup {
    /// As `--on-hangup` spells it.
    pub fn name(self) -> &'static str {
        match self {
            OnHangup::Cancel => "cancel",
            OnHangup::Finish => "finish",
        }
    }
}

/// One award the app handled, for whoever watches: the race that sent it,
/// or `idem serve`'s request log.
#[derive(Debug)]
pub struct Handled {
    pub request: Request,
    pub answer: Answer,
    pub trace: Trace,
    /// Workers checkouts the request made.
    pub checkouts: u32,
    /// When the request reached the strategy (after waiting for a thread).
    pub arrived: Instant,
    /// The status it was answered with.
    pub status: u16,
}

/// An app on another engine than PostgreSQL (MariaDB): how it decides an
/// award and counts its rows. The edges (the key and body read off the
/// wire, the answer written back, the threads, the log) stay the app's.
pub trait OnEngine: Send + Sync {
    /// The award `req` asks for, decided: its answer, its steps in `trace`,
    /// and how many connections it checked out.
    fn decide<'a>(&'a self, req: &'a Request, trace: &'a mut Trace) -> Deciding<'a>;
    /// `GET /counts`: the key rows, the XP rows and the service's calls.
    fn counts(&self) -> Counting<'_>;
}

/// What [`OnEngine::decide`] returns.
pub type Deciding<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = (Answer, u32)> + Send + 'a>>;
/// What [`OnEngine::counts`] returns.
pub type Counting<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(i64, i64, i64)>> + Send + 'a>>;

/// Where the app's awards are decided.
enum Backend {
    /// A strategy on PostgreSQL's pool.
    Postgres {
        pool: Box<Workers>,
        strategy: Arc<dyn Strategy>,
    },
    /// Another engine's app.
    Other(Arc<dyn OnEngine>),
}

/// The app: a strategy, a pool, threads, and who watches.
pub struct App {
    backend: Backend,
    shape: Shape,
    /// One permit per app server thread: a request, once read, waits here
    /// for a free thread, as it would in Puma's queue.
    threads: Arc<Semaphore>,
    /// Numbers requests that do not name their worker.
    numbered: AtomicUsize,
    watch: Option<Watch>,
    /// Where the award service counts the calls of this app's requests.
    service: ServiceCalls,
    /// This app's number among `--replicas`, said in every award's answer.
    replica: Option<HeaderValue>,
    /// Told when a request's work begins, for a race's client that is to
    /// hang up mid-request.
    hang_ups: Option<Arc<HangUps>>,
    /// `--read-from standby`: the standby's pool the finds read from.
    reader: Option<Workers>,
    /// With `--on-hangup finish`, one permit per request running, its
    /// client there or gone: a request whose client left is a task no
    /// connection counts, so these bound them (see [`App::finishing_at_most`]).
    finishing: Arc<Semaphore>,
    /// The permits `finishing` was made with.
    finishing_bound: usize,
}

/// With `--on-hangup finish`, how many requests run at once unless the
/// server says otherwise: as many as serve's default connection cap.
const FINISHING_DEFAULT: usize = crate::limits::MAX_CONNECTIONS.default() as usize;

/// Told of every award the app handled, before its response is written:
/// so a client that has its response finds the app's side already there.
pub type Watch = Box<dyn Fn(Handled) + Send + Sync>;

/// `POST /lessons/{lesson}/complete`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Award {
    user_id: i64,
    amount: i32,
}

impl App {
    /// Counts the award service's calls into `service` (a race's count).
    pub fn counting(self, service: ServiceCalls) -> Self {
        Self { service, ..self }
    }

    /// Tells `hang_ups` when each request's work begins.
    pub fn telling(self, hang_ups: Arc<HangUps>) -> Self {
        Self {
            hang_ups: Some(hang_ups),
            ..self
        }
    }

    /// Marks every award's answer with this app's number among replicas.
    pub fn replica(self, number: usize) -> Self {
        Self {
            replica: Some(HeaderValue::from(number)),
            ..self
        }
    }

    pub fn new(
        pool: Workers,
        strategy: Arc<dyn Strategy>,
        shape: Shape,
        threads: usize,
        watch: Option<Watch>,
    ) -> Self {
        let pool = Box::new(pool);
        Self::with_backend(Backend::Postgres { pool, strategy }, shape, threads, watch)
    }

    /// The app on another engine (`idem serve --engine mariadb`).
    pub fn on_engine(
        other: Arc<dyn OnEngine>,
        shape: Shape,
        threads: usize,
        watch: Option<Watch>,
    ) -> Self {
        Self::with_backend(Backend::Other(other), shape, threads, watch)
    }

    fn with_backend(backend: Backend, shape: Shape, threads: usize, watch: Option<Watch>) -> Self {
        Self {
            backend,
            shape,
            threads: Arc::new(Semaphore::new(threads)),
            numbered: AtomicUsize::new(0),
            watch,
            service: ServiceCalls::default(),
            replica: None,
            hang_ups: None,
            reader: None,
            finishing: Arc::new(Semaphore::new(FINISHING_DEFAULT)),
            finishing_bound: FINISHING_DEFAULT,
        }
    }

    /// With `--on-hangup finish`, at most `n` requests run at once (serve's
    /// connection cap); past it a request is answered 503 at once.
    pub fn finishing_at_most(self, n: usize) -> Self {
        let n = n.max(1);
        Self {
            finishing: Arc::new(Semaphore::new(n)),
            finishing_bound: n,
            ..self
        }
    }

    /// Sends the strategy's finds to `reader`, a standby's pool, as an app
    /// with a reading role does; its writes stay on the primary.
    pub fn reading_from(self, reader: Option<Workers>) -> Self {
        Self { reader, ..self }
    }

    /// Answers a request as the app treats a client that goes away: routed
    /// in the connection's own task, which is dropped with the connection
    /// (`cancel`), or in a task of its own that runs to the end (`finish`).
    pub async fn answer(
        self: Arc<Self>,
        req: hyper::Request<Incoming>,
        read_timeout: Duration,
    ) -> Response {
        match self.shape.on_hangup {
            OnHangup::Cancel => self.route(req, read_timeout).await,
            OnHangup::Finish => {
                // A request whose client leaves keeps running, counted here
                // until it ends; none past the bound is started.
                let Ok(running) = self.finishing.clone().try_acquire_owned() else {
                    return too_many_running(self.finishing_bound);
                };
                let app = self.clone();
                let routed = tokio::spawn(async move {
                    let _running = running;
                    app.route(req, read_timeout).await
                });
                routed.await.unwrap_or_else(|_| {
                    problem(
                        500,
                        "internal_error",
                        "the request's task ended without an answer",
                    )
                })
            }
        }
    }

    /// Finds the handler for a request and answers it; a body must arrive
    /// within `read_timeout`.
    pub async fn route(&self, req: hyper::Request<Incoming>, read_timeout: Duration) -> Response {
        let path = req.uri().path().to_owned();
        if path == "/counts" {
            return match *req.method() {
                Method::GET | Method::HEAD => match self.threads.acquire().await {
                    Ok(_thread) => self.counts().await,
                    Err(_) => stopping(),
                },
                _ => not_allowed("GET"),
            };
        }
        let Some(lesson) = lesson_of(&path) else {
            return problem(
                404,
                "not_found",
                &format!("no such endpoint: {path}; try POST /lessons/1/complete or GET /counts"),
            );
        };
        if req.method() != Method::POST {
            return not_allowed("POST");
        }
        match lesson {
            Ok(lesson) => self.complete(lesson, req, read_timeout).await,
            Err(detail) => problem(404, "not_found", &detail),
        }
    }

    /// `POST /lessons/{lesson}/complete`: one award, guarded by the strategy.
    /// The request is read whole before it waits for a thread, as Puma's
    /// reactor buffers a body before a thread takes it: a client that
    /// stalls mid-body holds no thread, only its own connection.
    async fn complete(
        &self,
        lesson: i32,
        req: hyper::Request<Incoming>,
        read_timeout: Duration,
    ) -> Response {
        let (parts, body) = req.into_parts();
        let key = contract::parse_key(
            parts
                .headers
                .get_all(KEY_HEADER)
                .iter()
                .map(HeaderValue::as_bytes),
        );
        let key = match key {
            Ok(key) => key,
            Err(err @ contract::KeyError::Missing) => {
                return problem(400, "idempotency_key_missing", &err.to_string());
            }
            Err(err) => return problem(400, "idempotency_key_invalid", &err.to_string()),
        };
        let read = tokio::time::timeout(read_timeout, Limited::new(body, MAX_BODY_BYTES).collect());
        let body = match read.await {
            Ok(Ok(body)) => body.to_bytes(),
            Ok(Err(err)) if err.downcast_ref::<LengthLimitError>().is_some() => {
                return closing(problem(
                    413,
                    "body_too_large",
                    &format!("the body must be at most {MAX_BODY_BYTES} bytes"),
                ));
            }
            // The client went away mid-body: nobody reads this answer.
            Ok(Err(_)) => return closing(problem(400, "invalid_body", "the body was cut off")),
            Err(_) => {
                let waited = read_timeout.as_millis();
                let detail = format!("the body did not arrive within {waited} ms");
                return closing(problem(408, "body_timeout", &detail));
            }
        };
        let award = match award_of(&body) {
            Ok(award) => award,
            Err(detail) => return problem(400, "invalid_body", &detail),
        };
        let Ok(_thread) = self.threads.acquire().await else {
            return stopping();
        };
        let key = self.shape.key_scope.key_of(&parts.headers, key);
        let request = self.request_of(&parts, key, &award, lesson);
        let arrived = Instant::now();
        let mut trace = Trace::new(arrived);
        trace.hang_up = self.hang_ups.clone().map(|h| (h, request.worker));
        let (answer, checkouts) = self.decide(&request, &mut trace).await;
        let mut response = answered(&answer, &request);
        // The work called the service but its ledger could not record the
        // call: the app does not answer as if all were well.
        if request
            .service
            .as_ref()
            .is_some_and(ServiceCalls::unwritten)
        {
            response = problem(
                500,
                "service_call_not_recorded",
                "the award service was called, but its ledger could not record the call",
            );
        }
        if let Some(replica) = &self.replica {
            response
                .headers_mut()
                .insert(REPLICA_HEADER, replica.clone());
        }
        if let Some(watch) = &self.watch {
            watch(Handled {
                status: response.status().as_u16(),
                request,
                answer,
                trace,
                checkouts,
                arrived,
            });
        }
        response
    }

    /// The award decided where the app decides: its answer, and the
    /// connections it checked out.
    async fn decide(&self, request: &Request, trace: &mut Trace) -> (Answer, u32) {
        match &self.backend {
            Backend::Postgres { pool, strategy } => {
                let mut lease = Lease::new((**pool).clone(), self.shape.checkout_timeout)
                    .reading_from(self.reader.clone());
                let answer = respond(&**strategy, &mut lease, request, trace).await;
                (answer, lease.checkouts)
            }
            Backend::Other(other) => other.decide(request, trace).await,
        }
    }

    /// The award as the strategies take it: its worker is the one the
    /// request names (a race's client), else the next number.
    fn request_of(
        &self,
        parts: &hyper::http::request::Parts,
        key: String,
        award: &Award,
        lesson: i32,
    ) -> Request {
        let worker = parts
            .headers
            .get(WORKER_HEADER)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .filter(|w| *w > 0)
            .unwrap_or_else(|| self.numbered.fetch_add(1, Ordering::Relaxed) + 1);
        let params = Params {
            operation: OPERATION,
            user_id: award.user_id,
            amount: award.amount,
            lesson,
        };
        let shape = self.shape;
        let mut request = Request::new(worker, key, params, shape.fingerprint, shape.work);
        // The query string is part of what was asked (`?dry_run=1`): a
        // fingerprint without it would replay a dry run as the real thing.
        if let (Some(fingerprint), Some(query)) = (
            request.fingerprint.as_mut(),
            parts.uri.query().filter(|q| !q.is_empty()),
        ) {
            *fingerprint = Params::fingerprint_with_query(fingerprint, query);
        }
        request.work_fails = shape.fail_work == Some(worker);
        request.service = Some(self.service.for_request());
        request
    }

    /// `GET /counts`: the rows in the app's two tables (see [`COUNTS`]).
    async fn counts(&self) -> Response {
        let counted = async {
            let pool = match &self.backend {
                Backend::Postgres { pool, .. } => pool,
                Backend::Other(other) => return other.counts().await,
            };
            let conn = pool::checkout(pool, self.shape.checkout_timeout).await?;
            let row = conn.fetch_one(&COUNTS, &[]).await?;
            anyhow::Ok((
                row.get::<_, i64>(0),
                row.get::<_, i64>(1),
                row.get::<_, i64>(2),
            ))
        };
        match counted.await {
            Ok((keys, xp, calls)) => {
                let mut counts = json!({ "key_rows": keys, "xp_rows": xp });
                // The service's calls, where they are counted: another
                // engine's app counts its own.
                if matches!(self.backend, Backend::Other(_)) {
                    counts["service_calls"] = json!(calls);
                }
                if let Some(ledger) = self.service.ledger() {
                    counts["service_calls"] = json!(calls);
                    if ledger.lost() > 0 {
                        counts["service_calls_not_written"] = json!(ledger.lost());
                    }
                }
                json_response(200, &counts)
            }
            Err(err) => problem(500, "database_error", &err.to_string()),
        }
    }
}

/// The award in a body: a JSON object (an array of the same numbers is not
/// one), with a positive amount.
fn award_of(body: &[u8]) -> Result<Award, String> {
    let shape = "the body must be a JSON object {\"user_id\": N, \"amount\": N}";
    let value: Value = serde_json::from_slice(body).map_err(|err| format!("{shape}: {err}"))?;
    if !value.is_object() {
        return Err(format!("{shape}, not {}", json_kind(&value)));
    }
    let award: Award = serde_json::from_value(value).map_err(|err| format!("{shape}: {err}"))?;
    if award.amount <= 0 {
        return Err("amount must be a positive whole number".into());
    }
    Ok(award)
}

/// `an array`, `a string`, ...: what a JSON value is, for a message.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The answer while the app shuts down.
fn stopping() -> Response {
    problem(503, "shutting_down", "the app is stopping")
}

/// `--on-hangup finish` has `bound` requests running already, their
/// clients there or gone: this one is not started.
fn too_many_running(bound: usize) -> Response {
    let mut response = problem(
        503,
        "too_many_running",
        &format!(
            "{bound} requests are running to their end already (--on-hangup finish runs at most \
             as many as connections are allowed); try again"
        ),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The response, with the connection closed after it: the request was not
/// read whole, so what follows on the wire cannot be trusted as a request.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The lesson in `/lessons/{lesson}/complete`; `None` for any other path,
/// `Err` for a lesson that is not a whole number.
fn lesson_of(path: &str) -> Option<Result<i32, String>> {
    let lesson = path.strip_prefix("/lessons/")?.strip_suffix("/complete")?;
    Some(
        lesson
            .parse::<i32>()
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| format!("no lesson {lesson:?}: lessons are numbered from 1")),
    )
}

/// The strategy's answer as the client gets it: the status from the one
/// table ([`Outcome::status`]), a replay marked as such, errors as problems.
fn answered(answer: &Answer, req: &Request) -> Response {
    let body = answer.body.clone().unwrap_or(Value::Null);
    // A worker that crashed answers nothing in a race; the app must answer.
    let status = match answer.outcome {
        Outcome::Crashed | Outcome::HungUp => 500,
        outcome => outcome.status(),
    };
    let response = match answer.outcome {
        Outcome::Created | Outcome::Duplicate | Outcome::Replayed | Outcome::Failed => {
            json_response(status, &body)
        }
        Outcome::Conflict => {
            let retry_ms = req.work.as_millis().max(1) as u64;
            let mut response = problem(
                status,
                contract::error_code(Outcome::Conflict),
                &detail(&body),
            );
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_ms.div_ceil(1000)));
            response
        }
        Outcome::Mismatch => problem(
            status,
            contract::error_code(Outcome::Mismatch),
            &detail(&body),
        ),
        Outcome::CheckoutTimeout => problem(
            status,
            contract::error_code(Outcome::CheckoutTimeout),
            &answer.did,
        ),
        Outcome::Crashed | Outcome::HungUp | Outcome::Error => {
            problem(status, contract::error_code(Outcome::Error), &answer.did)
        }
    };
    match answer.replayed {
        true => replayed(response),
        false => response,
    }
}

/// The message inside a strategy's error body.
fn detail(body: &Value) -> String {
    body.pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn replayed(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

fn json_response(status: u16, body: &Value) -> Response {
    with_body(status, "application/json", body)
}

/// A problem details response (RFC 9457).
pub fn problem(status: u16, code: &str, detail: &str) -> Response {
    with_body(
        status,
        PROBLEM_JSON,
        &contract::problem(status, code, detail),
    )
}

fn not_allowed(allow: &'static str) -> Response {
    let mut response = problem(405, "method_not_allowed", &format!("use {allow}"));
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn with_body(status: u16, content_type: &'static str, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = hyper::Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // The status line says what the body's title says: RFC 9110's names
    // (422 Unprocessable Content), where hyper would give older ones.
    let title = contract::title(response.status().as_u16());
    if !title.is_empty() && response.status().canonical_reason() != Some(title) {
        response
            .extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(title.as_bytes()));
    }
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
