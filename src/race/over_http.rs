//! The race over the wire: the course's app on a loopback port, each worker an HTTP client on its own connection.
//!
//! The app handles each request exactly as an in-process worker would, and
//! tells the race what it did (its steps, the XP row it made) before it
//! writes the response. The report of a worker joins the two: the app's
//! side for the steps, the wire's side for the outcome and the body.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper::Method;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::replicas::Replicas;
use super::settings::RaceSettings;
use super::worker_report::WorkerReport;
use crate::db::pool::Workers;
use crate::http::app::{App, Handled, Shape};
use crate::http::client::{self, Outgoing, Received, Target};
use crate::http::contract::{self, KEY_HEADER, REPLICA_HEADER, WORKER_HEADER};
use crate::request::hang_up::HangUps;
use crate::request::service::ServiceCalls;
use crate::request::{Answer, Outcome, Request, Trace};
use crate::strategy::Strategy;

/// How long a worker's request may take on the wire before it counts as unanswered.
const WIRE_TIMEOUT: Duration = Duration::from_secs(120);

/// The app as a race runs it, on a loopback port, for as long as the race
/// lives: in this process, or as replicas behind a front port.
pub struct Wire {
    /// The app's server in this process, ended with the race.
    _server: crate::tasks::AbortOnDrop,
    pub(crate) replicas: Option<Replicas>,
    pub(crate) end: Arc<WireEnd>,
}

/// What the race's clients share: where the app listens and what it handled.
pub struct WireEnd {
    target: Target,
    handled: Mutex<HashMap<usize, Handled>>,
    /// The client that hangs up mid-request, if one does, and how far into
    /// the work it does.
    pub(crate) hang_ups: Option<(Arc<HangUps>, Duration)>,
}

impl WireEnd {
    /// What the app did with `worker`'s request, once it told.
    pub fn take_handled(&self, worker: usize) -> Option<Handled> {
        self.handled.lock().ok()?.remove(&worker)
    }
}

impl RaceSettings {
    /// How the app handles every award under these settings.
    pub fn app_shape(&self) -> Shape {
        Shape {
            fingerprint: self.app.fingerprint,
            work: self.app.work,
            checkout_timeout: self.app.pool.checkout_timeout(),
            fail_work: self.faults.fail_work(),
            key_scope: self.app.key_scope,
            on_hangup: self.app.on_hangup,
        }
    }
}

impl Wire {
    /// Starts the app on a free loopback port.
    pub async fn open(
        pool: Workers,
        strategy: Arc<dyn Strategy>,
        s: &RaceSettings,
        service: &ServiceCalls,
        reader: Option<Workers>,
    ) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("could not listen on a loopback port")?;
        let addr: SocketAddr = listener.local_addr()?;
        let end = Arc::new(WireEnd {
            target: Target::parse(&format!(
                "http://{addr}/lessons/{}/complete",
                s.requests.asks().one_lesson().unwrap_or(1)
            ))?,
            handled: Mutex::new(HashMap::new()),
            hang_ups: s
                .faults
                .hang_up()
                .map(|plan| (Arc::new(HangUps::new(plan.worker)), s.app.work / 2)),
        });
        let told = end.clone();
        let watch = Box::new(move |handled: Handled| {
            if let Ok(mut map) = told.handled.lock() {
                map.insert(handled.request.worker, handled);
            }
        });
        let mut app = App::new(pool, strategy, s.app_shape(), s.app.threads, Some(watch))
            .counting(service.clone())
            .reading_from(reader);
        if let Some((hang_ups, _)) = &end.hang_ups {
            app = app.telling(hang_ups.clone());
        }
        let app = Arc::new(app);
        let server = crate::tasks::AbortOnDrop::spawn(async move {
            crate::http::listener::serve_with_defaults(app, listener).await
        });
        Ok(Self {
            _server: server,
            replicas: None,
            end,
        })
    }

    /// Starts the app as `s.app.replicas` processes behind a front port.
    pub async fn replicas(db: &crate::db::Database, s: &RaceSettings) -> Result<Self> {
        let front = TcpListener::bind("127.0.0.1:0")
            .await
            .context("could not listen on a loopback port")?;
        let replicas =
            Replicas::start(db, s.app(), front, crate::http::listener::Limits::default()).await?;
        let end = Arc::new(WireEnd {
            target: Target::parse(&format!(
                "http://{}/lessons/{}/complete",
                replicas.front,
                s.requests.asks().one_lesson().unwrap_or(1)
            ))?,
            handled: Mutex::new(HashMap::new()),
            hang_ups: None,
        });
        Ok(Self {
            _server: crate::tasks::AbortOnDrop::none(),
            replicas: Some(replicas),
            end,
        })
    }
}

/// One worker as an HTTP client: connect, stand at the gate, send its
/// request, read the answer; then join the app's side of it.
pub async fn run_client(
    end: Arc<WireEnd>,
    mut gate: watch::Receiver<Option<Instant>>,
    ready: Arc<Semaphore>,
    req: Request,
) -> (WorkerReport, Option<i32>) {
    let outgoing = award(&req);
    let connected = client::connect(&end.target, WIRE_TIMEOUT).await;
    ready.add_permits(1);
    let opened = match gate.wait_for(Option::is_some).await {
        Ok(at) => at.unwrap_or_else(Instant::now),
        Err(_) => Instant::now(),
    };
    let hang_up = end
        .hang_ups
        .as_ref()
        .and_then(|(hang_ups, after)| Some((hang_ups.listen(req.worker)?, *after)));
    let received = match (connected, hang_up) {
        (Ok(conn), Some((told, after))) => {
            match sent_or_hung_up(conn, &outgoing, told, after).await {
                Some(received) => received,
                None => {
                    let hung_up_ms = ms_between(opened, Instant::now());
                    return (hung_up(req, opened, hung_up_ms), None);
                }
            }
        }
        (Ok(mut conn), None) => conn.send(&outgoing, WIRE_TIMEOUT).await,
        (Err(err), _) => Err(err),
    };
    let answer_ms = ms_between(opened, Instant::now());
    let handled = end.take_handled(req.worker);
    joined(req, received, handled, opened, answer_ms)
}

/// Sends the request, and closes the connection `after` into the work if
/// the app says the work began before the answer came: `None` when it hung
/// up, else the answer.
async fn sent_or_hung_up(
    mut conn: client::Connection,
    outgoing: &Outgoing,
    told: tokio::sync::oneshot::Receiver<()>,
    after: Duration,
) -> Option<Result<Received>> {
    let hang_up = async {
        match told.await {
            Ok(()) => tokio::time::sleep(after).await,
            // Never told: this client is not the one.
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        received = conn.send(outgoing, WIRE_TIMEOUT) => Some(received),
        () = hang_up => None,
    }
    // The connection is dropped here, and with it the socket: the app
    // sees its client gone.
}

/// The report of a client that hung up: no answer; what the app did with
/// its request is joined later, if the app finished it.
fn hung_up(req: Request, opened: Instant, at_ms: f64) -> WorkerReport {
    let answer = Answer {
        replayed: false,
        outcome: Outcome::HungUp,
        saw: "—".into(),
        did: "hung up during its work".into(),
        made_xp: None,
        body: None,
        waited: None,
    };
    WorkerReport::new(req, answer, Trace::new(opened), 0, at_ms)
}

/// The request the course's client sends: the award's body, the key as an
/// sf-string, and the worker's number for the app's bookkeeping.
fn award(req: &Request) -> Outgoing {
    let body = json!({ "user_id": req.params.user_id, "amount": req.params.amount });
    let header = |name: &'static str, value: String| {
        HeaderValue::from_str(&value)
            .ok()
            .map(|v| (HeaderName::from_static(name), v))
    };
    let headers = [
        header(KEY_HEADER, contract::quote_key(&req.key)),
        header(WORKER_HEADER, req.worker.to_string()),
    ]
    .into_iter()
    .flatten()
    .chain([(CONTENT_TYPE, HeaderValue::from_static("application/json"))])
    .collect();
    Outgoing {
        method: Method::POST,
        path: format!("/lessons/{}/complete", req.params.lesson),
        headers,
        body: Bytes::from(body.to_string()),
    }
}

/// The worker's report: the app's steps, moved onto the race's clock; the
/// outcome, status and body as the client received them.
fn joined(
    req: Request,
    received: Result<Received>,
    handled: Option<Handled>,
    opened: Instant,
    answer_ms: f64,
) -> (WorkerReport, Option<i32>) {
    let (mut report, pid) = match handled {
        Some(h) => {
            let shift = ms_between(opened, h.arrived);
            let pid = h.trace.backend_pid;
            let mut report =
                WorkerReport::new(h.request, h.answer, h.trace, h.checkouts, answer_ms);
            for step in &mut report.steps {
                step.start_ms += shift;
                step.end_ms += shift;
            }
            (report, pid)
        }
        // The app answered before any strategy ran (or not at all), or
        // in a replica's process, whose steps stay there.
        None => {
            let answer = Answer {
                replayed: false,
                outcome: Outcome::Error,
                saw: "no answer from the app's strategy".into(),
                did: String::new(),
                made_xp: None,
                body: None,
                waited: None,
            };
            let report = WorkerReport::new(req, answer, Trace::new(opened), 0, answer_ms);
            (report, None)
        }
    };
    let replica = received
        .as_ref()
        .ok()
        .and_then(|r| r.headers.get(REPLICA_HEADER))
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if let Some(replica) = replica {
        report.replica = Some(replica);
    }
    match received {
        Ok(received) => {
            let body = received.json();
            report.outcome =
                contract::outcome_of(received.status, received.replayed(), body.as_ref());
            report.status = received.status;
            if let Some(replica) = report.replica.filter(|_| report.steps.is_empty()) {
                told_by_replica(&mut report, replica, body.as_ref());
            }
            report.body = body;
        }
        Err(err) => {
            report.outcome = Outcome::Error;
            report.status = 0;
            report.did = format!("{err:#}");
            report.body = None;
        }
    }
    (report, pid)
}

/// What a replica's answer says, for a worker whose steps stayed in the
/// replica's process: which replica, and what it answered.
fn told_by_replica(report: &mut WorkerReport, replica: usize, body: Option<&serde_json::Value>) {
    let xp = body.and_then(crate::strategy::work::xp_id_of);
    report.saw = format!("replica {replica}");
    report.made_xp = xp.filter(|_| report.outcome == Outcome::Created);
    report.did = match (report.outcome, xp) {
        (Outcome::Created, Some(xp)) => format!("made XP #{xp}"),
        (Outcome::Replayed, Some(xp)) => format!("replayed XP #{xp}"),
        (outcome, _) => format!("answered {}", outcome.status()),
    };
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}
