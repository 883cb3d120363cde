//! The app's front door: accepts connections within a cap, bounds how long a client may take to send a request or sit idle, and never stops on an `accept` error.
//!
//! `idem serve` is pointed at by other people's clients, load tools and
//! CI jobs, so nothing a client does may freeze the app for the others:
//! - a client has [`Limits::read_timeout`] to send its headers (hyper's
//!   header timer) and as long again for its body (the app's own, which
//!   answers 408 and closes);
//! - a connection on which no byte has moved for [`Limits::idle_timeout`],
//!   with no request being handled, is closed;
//! - at most [`Limits::max_connections`] are open at once (fewer when the
//!   process's descriptor limit allows fewer); past that a new connection
//!   gets a canned 503 and is closed;
//! - an `accept` that fails (out of descriptors, say) is retried after a
//!   short pause, and said once a second at most.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::app::App;
use super::observed::{Observed, Observer};

/// What bounds a client's time and the app's connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a client may take to send a request's headers, and again its body.
    pub(crate) read_timeout: Duration,
    /// How long a connection may sit with nothing moving before it is closed.
    pub(crate) idle_timeout: Duration,
    /// How many connections may be open at once.
    pub(crate) max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_timeout: Duration::from_millis(DEFAULT_READ_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(DEFAULT_IDLE_TIMEOUT_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// `--read-timeout-ms`'s default.
pub const DEFAULT_READ_TIMEOUT_MS: u64 = crate::limits::READ_TIMEOUT_MS.default();
/// `--idle-timeout-ms`'s default.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = crate::limits::IDLE_TIMEOUT_MS.default();
/// `--max-connections`'s default.
pub const DEFAULT_MAX_CONNECTIONS: usize = crate::limits::MAX_CONNECTIONS.default() as usize;

/// Descriptors kept back from the connection cap for everything else the
/// process holds open: its pools' connections to PostgreSQL (added per
/// pooled connection), the runtime, the cluster's pipes, the log.
const RESERVED_DESCRIPTORS: u64 = 64;

/// How long an `accept` that failed is left before the next try.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long a connection told to close may take to finish what it sends.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a connection past the cap is told before it is closed: written
/// out once, as bytes, since no request of its own is read.
pub(super) static OVER_CAP: LazyLock<Vec<u8>> = LazyLock::new(|| {
    raw_problem(
        503,
        "too_many_connections",
        "the app has too many open connections; try again",
    )
});

/// A whole HTTP/1.1 problem response as bytes, with `connection: close`:
/// for a connection whose request is never read.
pub(super) fn raw_problem(status: u16, code: &str, detail: &str) -> Vec<u8> {
    let body = super::contract::problem(status, code, detail).to_string();
    let retry = if status == 503 {
        "retry-after: 1\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {}\r\n{retry}\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        super::contract::title(status),
        super::contract::PROBLEM_JSON,
        body.len()
    )
    .into_bytes()
}

/// Something the front door wants the operator to know (an `accept` error).
pub type Note = Arc<dyn Fn(String) + Send + Sync>;

impl Limits {
    /// The cap as the process can hold it: `max_connections`, or fewer when
    /// the soft `RLIMIT_NOFILE` leaves less room beside `pooled` connections.
    /// `None` when it leaves none at all.
    pub fn connections_allowed(&self, pooled: usize) -> Option<usize> {
        let room = descriptor_limit()?
            .saturating_sub(RESERVED_DESCRIPTORS + pooled as u64)
            .min(usize::MAX as u64) as usize;
        (room > 0).then(|| room.min(self.max_connections))
    }

    /// The cap of a front door that forwards each connection to a replica:
    /// every one holds two descriptors here (the client's and the
    /// replica's). `None` when the limit leaves room for none.
    pub fn forwarded_allowed(&self) -> Option<usize> {
        let room = self.connections_allowed(0)?;
        let forwarded = (descriptor_limit()?.saturating_sub(RESERVED_DESCRIPTORS) / 2)
            .min(usize::MAX as u64) as usize;
        (forwarded > 0).then(|| forwarded.min(room))
    }
}

/// The soft `RLIMIT_NOFILE`, if it is set.
pub fn descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    Some(if limit.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        limit.rlim_cur
    })
}

/// Serves `app` on `listener` within `limits` (with `cap` connections at
/// most), until this future is dropped, which drops every connection too;
/// it never ends by itself.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    limits: Limits,
    cap: usize,
    note: Option<Note>,
    tls: Option<TlsAcceptor>,
) {
    let open = Arc::new(Semaphore::new(cap.max(1)));
    let mut connections = JoinSet::new();
    let mut failures = Failures::default();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                if let (Some(note), Some(said)) = (&note, failures.count(&err)) {
                    note(said);
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            // Best effort: a client that cannot take 200 bytes now gets a close.
            let _ = stream.try_write(&OVER_CAP);
            continue;
        };
        // Small answers go out at once, not after Nagle's delay.
        let _ = stream.set_nodelay(true);
        let (app, tls) = (app.clone(), tls.clone());
        connections.spawn(async move {
            match tls {
                None => connection(app, stream, limits).await,
                // The handshake is bounded as the headers are.
                Some(tls) => {
                    let handshake = tokio::time::timeout(limits.read_timeout, tls.accept(stream));
                    if let Ok(Ok(stream)) = handshake.await {
                        connection(app, stream, limits).await;
                    }
                }
            }
            drop(permit);
        });
    }
}

/// [`serve`] with the default limits and no notes: the app as idem's own
/// races and benches reach it on a loopback port.
pub async fn serve_with_defaults(app: Arc<App>, listener: TcpListener) {
    let limits = Limits::default();
    serve(app, listener, limits, limits.max_connections, None, None).await
}

/// Counts `accept` failures and says one at most once a second.
#[derive(Default)]
struct Failures {
    since_said: u64,
    said_at: Option<Instant>,
}

impl Failures {
    fn count(&mut self, err: &io::Error) -> Option<String> {
        self.since_said += 1;
        if self
            .said_at
            .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
        {
            return None;
        }
        let times = std::mem::take(&mut self.since_said);
        self.said_at = Some(Instant::now());
        let times = if times > 1 {
            format!(" ({times} times since the last note)")
        } else {
            String::new()
        };
        Some(format!(
            "could not accept a connection: {err}{times}; trying again in {} ms",
            ACCEPT_BACKOFF.as_millis()
        ))
    }
}

/// One client's connection, from its first byte until it closes, is closed
/// for idling, or the app stops: HTTP/1.1, or HTTP/2 (by its preface, over
/// TLS or cleartext).
async fn connection<T>(app: Arc<App>, stream: T, limits: Limits)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let in_flight = Arc::new(AtomicUsize::new(0));
    let io = Observed {
        io: stream,
        observer: activity.clone(),
    };
    let (serving, requests) = (in_flight.clone(), activity.clone());
    let service = service_fn(move |req| {
        let (app, serving, requests) = (app.clone(), serving.clone(), requests.clone());
        async move {
            let _handling = InFlight::enter(&serving, &requests);
            Ok::<_, Infallible>(app.answer(req, limits.read_timeout).await)
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_timeout);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let tick = (limits.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut closing_since: Option<Instant> = None;
    loop {
        tokio::select! {
            // A client that hangs up mid-request is its own business.
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        match closing_since {
            Some(since) if since.elapsed() >= CLOSE_GRACE => return,
            Some(_) => {}
            None => {
                let idle = in_flight.load(Ordering::Acquire) == 0
                    && activity.quiet_for() >= limits.idle_timeout;
                if idle {
                    conn.as_mut().graceful_shutdown();
                    closing_since = Some(Instant::now());
                }
            }
        }
    }
}

/// When a connection last did something: over HTTP/1.1 any byte that
/// moved; over HTTP/2 a request that began or ended, since its frames
/// without a stream (PING, SETTINGS, WINDOW_UPDATE) would let a client
/// hold a connection slot for ever with a PING now and then (Go's HTTP/2
/// server does not count them either).
struct Activity {
    start: Instant,
    /// Milliseconds from `start`.
    last_ms: AtomicU64,
    /// The client opened with HTTP/2's preface (`PRI * HTTP/2.0`).
    http2: AtomicBool,
    /// Whether the first bytes have been looked at.
    looked: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            http2: AtomicBool::new(false),
            looked: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Release);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Marks a request as being handled for as long as it lives; its start
/// and its end are activity.
struct InFlight<'a>(&'a AtomicUsize, &'a Activity);

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize, activity: &'a Activity) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        Self(count, activity)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.1.touch();
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Over HTTP/1.1 any byte moved is activity; over HTTP/2 only requests are.
impl Observer for Activity {
    fn read(&self, bytes: &[u8]) {
        if !self.looked.swap(true, Ordering::AcqRel) && bytes.starts_with(b"PRI ") {
            self.http2.store(true, Ordering::Release);
        }
        if !self.http2.load(Ordering::Acquire) {
            self.touch();
        }
    }

    fn wrote(&self, _: usize) {
        if !self.http2.load(Ordering::Acquire) {
            self.touch();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_over_cap_answer_says_its_length_truly() {
        let text = std::str::from_utf8(&OVER_CAP).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["status"], 503);
    }
}
