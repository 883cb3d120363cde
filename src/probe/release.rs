//! How a probe's N requests leave together: HTTP/2's single packet, HTTP/1.1's last byte, or HTTP/1.1 whole requests at a gate; and the report of how tight the release was.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::shot::Shot;
use crate::http::client::{Connection, Outgoing, Target};
use crate::http::last_byte::{self, Trigger};
use crate::http::single_packet;
use crate::http::stream::{Protocol, Stream};

/// How long the last-byte release waits for every request to be at the
/// server but for its final byte, before it releases whatever is ready.
const STAGE_LIMIT: Duration = Duration::from_secs(2);

/// A release looser than this is no tight race: a clean verdict from it is
/// weaker evidence, and the report says so.
pub const LOOSE: Duration = Duration::from_millis(1);

/// How a probe's requests leave together: the one list of release modes.
/// HTTP/2 always goes in one packet; `--release` picks among the HTTP/1.1
/// modes ([`Mode::HTTP1`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// HTTP/2: every stream's final frame in one write.
    SinglePacket,
    /// HTTP/1.1: every request sent but its final byte, then the final
    /// bytes from one loop.
    #[default]
    LastByte,
    /// HTTP/1.1: whole requests, each sent by its own task at the gate.
    WholeRequest,
}

impl Mode {
    /// Every mode, the loosest release first.
    pub const ALL: [Mode; 3] = [Mode::WholeRequest, Mode::LastByte, Mode::SinglePacket];

    /// The modes `--release` chooses from, its default first.
    pub const HTTP1: [Mode; 2] = [Mode::LastByte, Mode::WholeRequest];

    /// As reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::SinglePacket => "single packet",
            Mode::LastByte => "last byte",
            Mode::WholeRequest => "whole request",
        }
    }

    /// As `--release` spells it.
    pub fn flag(self) -> &'static str {
        match self {
            Mode::SinglePacket => "single-packet",
            Mode::LastByte => "last-byte",
            Mode::WholeRequest => "whole",
        }
    }

    /// What `--release`'s help says of it.
    pub fn help(self) -> &'static str {
        match self {
            Mode::SinglePacket => "Every HTTP/2 stream's final frame in one write",
            Mode::LastByte => {
                "Each request sent but its final byte, then every final byte from one loop"
            }
            Mode::WholeRequest => "Whole requests, each sent by its own task when the gate opens",
        }
    }

    /// The protocol the mode speaks.
    pub fn protocol(self) -> Protocol {
        match self {
            Mode::SinglePacket => Protocol::Http2,
            Mode::LastByte | Mode::WholeRequest => Protocol::Http11,
        }
    }

    /// Whether the mode puts every final byte in one write, so that a
    /// server can read them all at once.
    pub fn in_one_write(self) -> bool {
        self == Mode::SinglePacket
    }
}

/// How one volley left.
#[derive(Debug, Clone, Serialize)]
pub struct Release {
    pub mode: Mode,
    pub protocol: Protocol,
    pub tls: bool,
    /// Over TLS, whether the server's certificate was checked (`--insecure` not).
    pub verified: bool,
    /// How many requests were sent (fewer than asked when the server caps streams).
    pub sent: usize,
    /// Microseconds between the client's first and last final write.
    pub spread_us: f64,
    /// HTTP/2: how many writes carried the final frames (1: one packet).
    pub final_writes: Option<usize>,
    /// What made the release other than asked (a cap, requests not staged in time).
    pub notes: Vec<String>,
}

impl Release {
    fn new(mode: Mode, target: &Target) -> Self {
        Self {
            mode,
            protocol: mode.protocol(),
            tls: target.scheme() == "https",
            verified: !target.unverified,
            sent: 0,
            spread_us: 0.0,
            final_writes: None,
            notes: Vec::new(),
        }
    }

    fn spread(&mut self, (first, last): (Instant, Instant)) {
        self.spread_us = last.saturating_duration_since(first).as_secs_f64() * 1e6;
    }

    /// Looser than a millisecond, or not in one packet.
    pub fn loose(&self) -> bool {
        self.spread_us > LOOSE.as_secs_f64() * 1e6 || self.final_writes.is_some_and(|w| w > 1)
    }
}

/// Sends `n` copies of `outgoing` to `target`, released as the protocol
/// allows: every connection is opened first.
pub async fn volley(
    target: &Target,
    outgoing: Arc<Outgoing>,
    n: usize,
    http1: Mode,
    timeout: Duration,
) -> (Vec<Shot>, Release) {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let first = match target.open(left()).await {
        Ok(stream) => stream,
        Err(err) => {
            let opened = Instant::now();
            let err = format!("{err:#}");
            let shots = (1..=n)
                .map(|i| Shot::new(i, opened, Err(anyhow::anyhow!(err.clone()))))
                .collect();
            return (shots, Release::new(http1, target));
        }
    };
    if target.protocol_of(&first) == Protocol::Http2 {
        return single(target, first, &outgoing, n, left()).await;
    }
    let mut streams = vec![Ok(first)];
    let mut opening = JoinSet::new();
    for _ in 1..n {
        let (target, limit) = (target.clone(), left());
        opening.spawn(async move { target.open(limit).await });
    }
    while let Some(opened) = opening.join_next().await {
        streams.push(opened.unwrap_or_else(|e| Err(anyhow::anyhow!("opening panicked: {e}"))));
    }
    match http1 {
        Mode::WholeRequest => whole(target, streams, outgoing, left()).await,
        Mode::LastByte | Mode::SinglePacket => held(target, streams, outgoing, left()).await,
    }
}

/// HTTP/2 on the one connection.
async fn single(
    target: &Target,
    stream: Stream,
    outgoing: &Outgoing,
    n: usize,
    left: Duration,
) -> (Vec<Shot>, Release) {
    let mut release = Release::new(Mode::SinglePacket, target);
    let started = Instant::now();
    let sent = single_packet::burst(
        stream,
        target.scheme(),
        target.authority(),
        outgoing,
        n,
        left,
        target.max_response_bytes,
    )
    .await;
    let sent = match sent {
        Ok(sent) => sent,
        Err(err) => {
            let err = format!("{err:#}");
            let shots = (1..=n)
                .map(|i| Shot::new(i, started, Err(anyhow::anyhow!(err.clone()))))
                .collect();
            return (shots, release);
        }
    };
    release.sent = sent.answers.len();
    release.spread(sent.released);
    release.final_writes = Some(sent.final_writes);
    release.notes.extend(sent.capped.clone());
    let opened = sent.released.0;
    let mut shots: Vec<Shot> = sent
        .answers
        .into_iter()
        .enumerate()
        .map(|(i, answer)| Shot::new(i + 1, opened, answer))
        .collect();
    for i in shots.len() + 1..=n {
        let why = sent.capped.clone().unwrap_or_default();
        shots.push(Shot::new(
            i,
            opened,
            Err(anyhow::anyhow!("not sent: {why}")),
        ));
    }
    (shots, release)
}

/// HTTP/1.1, each request held at its final byte, then all released at once.
async fn held(
    target: &Target,
    streams: Vec<anyhow::Result<Stream>>,
    outgoing: Arc<Outgoing>,
    left: Duration,
) -> (Vec<Shot>, Release) {
    let mut release = Release::new(Mode::LastByte, target);
    let mut triggers: Vec<Trigger> = Vec::new();
    let mut sending = JoinSet::new();
    let gate = Arc::new(std::sync::OnceLock::<Instant>::new());
    for (i, stream) in streams.into_iter().enumerate() {
        let (target, outgoing, gate) = (target.clone(), outgoing.clone(), gate.clone());
        let stream = match stream {
            Ok(stream) => {
                let (io, trigger) = last_byte::hold(stream);
                triggers.push(trigger);
                Ok(io)
            }
            Err(err) => Err(err),
        };
        sending.spawn(async move {
            let received = match stream {
                Ok(io) => match Connection::over(io, &target).await {
                    Ok(mut conn) => conn.send(&outgoing, left).await,
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            let opened = gate.get().copied().unwrap_or_else(Instant::now);
            Shot::new(i + 1, opened, received)
        });
    }
    if !last_byte::all_staged(&triggers, STAGE_LIMIT.min(left)).await {
        let staged = triggers.iter().filter(|t| t.staged()).count();
        release.notes.push(format!(
            "{staged} of {} requests were at the server but for their final byte within {} ms; the rest were released as they were",
            triggers.len(),
            STAGE_LIMIT.as_millis()
        ));
    }
    let released = last_byte::release_all(&triggers);
    let _ = gate.set(released.0);
    release.spread(released);
    release.sent = triggers.len();
    (gathered(sending).await, release)
}

/// HTTP/1.1, whole requests, each task sending its own when the gate opens.
async fn whole(
    target: &Target,
    streams: Vec<anyhow::Result<Stream>>,
    outgoing: Arc<Outgoing>,
    left: Duration,
) -> (Vec<Shot>, Release) {
    let mut release = Release::new(Mode::WholeRequest, target);
    let (gate, gate_rx) = watch::channel(None::<Instant>);
    let mut sending = JoinSet::new();
    let mut connected = 0;
    for (i, stream) in streams.into_iter().enumerate() {
        let (target, outgoing, mut gate) = (target.clone(), outgoing.clone(), gate_rx.clone());
        let conn = match stream {
            Ok(stream) => Connection::over(stream, &target).await,
            Err(err) => Err(err),
        };
        connected += usize::from(conn.is_ok());
        sending.spawn(async move {
            let opened = match gate.wait_for(Option::is_some).await {
                Ok(at) => at.unwrap_or_else(Instant::now),
                Err(_) => Instant::now(),
            };
            let sent_at = Instant::now();
            let received = match conn {
                Ok(mut conn) => conn.send(&outgoing, left).await,
                Err(err) => Err(err),
            };
            (Shot::new(i + 1, opened, received), sent_at)
        });
    }
    gate.send_replace(Some(Instant::now()));
    let mut shots = Vec::new();
    let mut sent_at = Vec::new();
    while let Some(done) = sending.join_next().await {
        if let Ok((shot, at)) = done {
            shots.push(shot);
            sent_at.push(at);
        }
    }
    if let (Some(first), Some(last)) = (sent_at.iter().min(), sent_at.iter().max()) {
        release.spread((*first, *last));
    }
    release.sent = connected;
    shots.sort_by_key(|s| s.request);
    (shots, release)
}

/// Every shot, in request order.
async fn gathered(mut sending: JoinSet<Shot>) -> Vec<Shot> {
    let mut shots = Vec::new();
    while let Some(shot) = sending.join_next().await {
        if let Ok(shot) = shot {
            shots.push(shot);
        }
    }
    shots.sort_by_key(|s| s.request);
    shots
}
