//! `--sink ADDR`: idem plays the downstream service (a payment provider, a mailer) that the API under test calls for its side effect, and counts the calls.
//!
//! The API is configured to call the sink's URL where it would call the
//! provider. Each call is answered (`200 {}`, or `--sink-status`, after
//! `--sink-delay-ms`) and counted, in all and per `Idempotency-Key` when
//! the API forwards one. The probe's count is the calls that carried one
//! of the keys the probe sent (as it is, or within a key the API derived
//! from it, such as `/pay KEY`), before and after, so a guard whose rows
//! look right while the provider was called N times is caught. A call
//! with no key or with someone else's (a stray `curl`, another client) is
//! nobody's the probe can prove: it is not counted, and the verdict says
//! how many came. An API that forwards no key is therefore never judged
//! by the sink (no effect counted), and is told to forward it. Bounded as everything idem listens with: at
//! most [`MAX_CONNECTIONS`] connections at once, headers within
//! [`READ_TIMEOUT`], at most [`MAX_BODY_BYTES`] of a body read.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{OnceCell, Semaphore};

/// The most connections the sink serves at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a call's headers may take to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a call's body read (and then thrown away).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The calls the sink received.
#[derive(Debug, Default)]
struct Calls {
    all: AtomicU64,
    per_key: Mutex<HashMap<String, u64>>,
    /// What tells the probe's calls from the rest.
    mine: Mutex<Mine>,
    /// The next call is answered 500: an effect that failed (the profile's
    /// "after a failed effect").
    fail_next: std::sync::atomic::AtomicBool,
}

/// The calls that are the probe's, and the rest.
#[derive(Debug, Default)]
struct Mine {
    /// The keys the probe sent.
    keys: std::collections::HashSet<String>,
    /// Calls that carried one of them.
    keyed: u64,
    /// Calls not counted: no key, or someone else's.
    others: u64,
}

impl Mine {
    fn call(&mut self, key: Option<&str>) {
        // An API may forward a key derived from the client's (scoped by
        // its path, prefixed by its tenant): the probe's key within it counts.
        match key {
            Some(key) if self.keys.iter().any(|mine| key.contains(mine.as_str())) => {
                self.keyed += 1
            }
            _ => self.others += 1,
        }
    }
}

/// The sink: where it listens, what it answers, what it counted.
#[derive(Debug, Clone)]
pub struct SinkCounter {
    addr: SocketAddr,
    status: u16,
    delay: Duration,
    calls: Arc<Calls>,
    serving: Arc<OnceCell<Serving>>,
}

/// The accepting task, ended when the last counter is dropped.
type Serving = crate::tasks::AbortOnDrop;

impl SinkCounter {
    pub fn new(addr: SocketAddr, status: u16, delay: Duration) -> Self {
        Self {
            addr,
            status,
            delay,
            calls: Arc::default(),
            serving: Arc::default(),
        }
    }

    /// Starts listening, the first time; a port that cannot be had is an
    /// error before any request is sent.
    pub async fn start(&self) -> Result<Vec<String>> {
        self.serving
            .get_or_try_init(|| async {
                let listener = TcpListener::bind(self.addr)
                    .await
                    .with_context(|| format!("--sink could not listen on {}", self.addr))?;
                let task = tokio::spawn(accept(
                    listener,
                    self.calls.clone(),
                    self.status,
                    self.delay,
                ));
                anyhow::Ok(Serving::from(task))
            })
            .await?;
        Ok(vec![format!(
            "the sink listens on http://{}/: point the API's downstream service there",
            self.addr
        )])
    }

    /// The calls so far that carried one of the probe's keys.
    pub fn count(&self) -> i64 {
        i64::try_from(self.mine().keyed).unwrap_or(i64::MAX)
    }

    /// The calls so far that were not counted as the probe's.
    pub fn others(&self) -> u64 {
        self.mine().others
    }

    /// Remembers `key` as one the probe sends: calls carrying it are its.
    pub fn sends(&self, key: &str) {
        self.mine().keys.insert(key.to_owned());
    }

    fn mine(&self) -> std::sync::MutexGuard<'_, Mine> {
        self.calls.mine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the next call 500, as a provider that failed.
    pub fn fail_next_call(&self) {
        self.calls.fail_next.store(true, Ordering::SeqCst);
    }

    /// The calls received so far that carried `key`.
    pub fn calls_for(&self, key: &str) -> u64 {
        let per_key = self.calls.per_key.lock().unwrap_or_else(|e| e.into_inner());
        per_key.get(key).copied().unwrap_or(0)
    }
}

/// Accepts connections, at most [`MAX_CONNECTIONS`] at once.
async fn accept(listener: TcpListener, calls: Arc<Calls>, status: u16, delay: Duration) {
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = room.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let calls = calls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |req| answer(req, calls.clone(), status, delay));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
        });
    }
}

/// One call: counted, its body read up to the bound, answered.
async fn answer(
    req: hyper::Request<Incoming>,
    calls: Arc<Calls>,
    status: u16,
    delay: Duration,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let key = req
        .headers()
        .get(crate::http::contract::KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|k| k.trim().trim_matches('"').to_owned());
    let _ = tokio::time::timeout(
        READ_TIMEOUT,
        Limited::new(req.into_body(), MAX_BODY_BYTES).collect(),
    )
    .await;
    calls.all.fetch_add(1, Ordering::SeqCst);
    calls
        .mine
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .call(key.as_deref());
    if let Some(key) = key {
        let mut per_key = calls.per_key.lock().unwrap_or_else(|e| e.into_inner());
        *per_key.entry(key).or_default() += 1;
    }
    tokio::time::sleep(delay).await;
    let status = match calls.fail_next.swap(false, Ordering::SeqCst) {
        true => 500,
        false => status,
    };
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"{}")));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
