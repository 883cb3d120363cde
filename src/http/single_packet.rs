//! The HTTP/2 single-packet release: N requests as N streams on one connection, each sent but for its final frame, then every final frame in one write, so that they reach the server in one TCP segment.
//!
//! After PortSwigger's 2023 research ("Smashing the state machine"): on a
//! multiplexed connection the network can no longer spread the requests
//! apart, because their last frames travel together. The connection is
//! driven in this task only, never in one of its own: while the final
//! frames are queued, nothing can write them one by one; the next time the
//! connection is polled, h2 writes them from one buffer in one go.
//!
//! The server's SETTINGS are read first (a PING's answer comes after
//! them): more streams than its `MAX_CONCURRENT_STREAMS`, or bodies its
//! flow-control windows would not let out before the release, and the
//! burst is cut to what fits, which the report says.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use h2::SendStream;
use h2::client::{Connection as H2Connection, ResponseFuture};
use hyper::header::{CONNECTION, HOST, HeaderValue, TRANSFER_ENCODING};

use super::message::{BodyTooLarge, Outgoing, Received};
use super::observed::{Observed, Observer};
use super::stream::Stream;

/// How one burst left.
#[derive(Debug)]
pub struct Sent {
    /// The responses, in stream order.
    pub answers: Vec<Result<Received>>,
    /// When the first and the last final frame were queued.
    pub released: (Instant, Instant),
    /// How many writes carried the final frames (1: one packet).
    pub final_writes: usize,
    /// Why fewer streams were sent than asked, if so.
    pub capped: Option<String>,
}

/// Sends `n` copies of `req` on `stream` (already HTTP/2: ALPN `h2`, or
/// prior knowledge), released in one packet, within `timeout`; answers
/// are read up to `max_body` bytes each.
pub async fn burst(
    stream: Stream,
    scheme: &str,
    authority: &str,
    req: &Outgoing,
    n: usize,
    timeout: Duration,
    max_body: usize,
) -> Result<Sent> {
    let place = authority.to_owned();
    tokio::time::timeout(
        timeout,
        burst_now(stream, scheme, authority, req, n, max_body),
    )
    .await
    .map_err(|_| anyhow::anyhow!("{place} did not answer within {} ms", timeout.as_millis()))?
}

/// An HTTP/2 connection whose writes are counted, with the server's
/// SETTINGS read (a PING's answer comes after them).
async fn settled(
    stream: Stream,
    authority: &str,
    max_body: usize,
) -> Result<(
    Arc<Writes>,
    h2::client::SendRequest<Bytes>,
    H2Connection<Observed<Stream, Arc<Writes>>, Bytes>,
    h2::PingPong,
)> {
    let writes = Arc::new(Writes::default());
    let counted = Observed {
        io: stream,
        observer: writes.clone(),
    };
    let (client, mut conn) = h2::client::Builder::new()
        .initial_window_size(max_body.clamp(65_535, 1 << 24) as u32)
        .handshake::<_, Bytes>(counted)
        .await
        .map_err(|e| anyhow::anyhow!("{authority} did not speak HTTP/2: {e}"))?;
    let Some(mut pings) = conn.ping_pong() else {
        bail!("the HTTP/2 connection to {authority} has no PING");
    };
    driving(&mut conn, pings.ping(h2::Ping::opaque()))
        .await
        .map_err(|e| anyhow::anyhow!("{authority} did not answer a PING: {e}"))?;
    Ok((writes, client, conn, pings))
}

async fn burst_now(
    stream: Stream,
    scheme: &str,
    authority: &str,
    req: &Outgoing,
    n: usize,
    max_body: usize,
) -> Result<Sent> {
    let (writes, mut client, mut conn, mut pings) = settled(stream, authority, max_body).await?;
    let most = conn.max_concurrent_send_streams();
    let (body, last) = split_last(&req.body);
    if most == 0 {
        bail!(
            "{authority} allows no stream at all (SETTINGS_MAX_CONCURRENT_STREAMS = 0): it takes no HTTP/2 request"
        );
    }
    let (n, mut capped) = match n > most {
        true => (
            most,
            Some(format!(
                "the server allows {most} stream{} at a time (SETTINGS_MAX_CONCURRENT_STREAMS = {most})",
                if most == 1 { "" } else { "s" }
            )),
        ),
        false => (n, None),
    };

    let mut streams: Vec<(ResponseFuture, SendStream<Bytes>)> = Vec::with_capacity(n);
    for _ in 0..n {
        client = driving(&mut conn, client.ready()).await?;
        let (answer, mut send) = client.send_request(h2_request(scheme, authority, req)?, false)?;
        send.reserve_capacity(req.body.len());
        streams.push((answer, send));
    }
    // Every stream's window granted, or the burst cut to those that got it.
    driving(&mut conn, pings.ping(h2::Ping::opaque())).await?;
    if let Some(cut) = cut_to_window(&mut streams, req.body.len()) {
        capped = Some(cut);
    }
    if streams.is_empty() {
        bail!("{authority} lets no request's body out (HTTP/2 flow control)");
    }
    // A server may answer (and close the stream) before the body is all
    // there, as one does for a request it refuses outright: a send that
    // finds its stream closed is no failure, the answer tells.
    for (_, send) in &mut streams {
        if !body.is_empty() {
            let _ = send.send_data(body.clone(), false);
        }
    }
    // Everything but the final frames is at the server once this returns.
    driving(&mut conn, pings.ping(h2::Ping::opaque())).await?;

    // The release: every final frame queued with nothing polled in
    // between; the connection writes them together when next driven.
    writes.mark();
    let first = Instant::now();
    for (_, send) in &mut streams {
        let _ = send.send_data(last.clone(), true);
    }
    let released = (first, Instant::now());

    let streams_sent = streams.len();
    let mut answers = Vec::with_capacity(streams_sent);
    for (answer, _send) in streams {
        answers.push(driving(&mut conn, read_answer(answer, authority, max_body)).await);
    }
    let final_writes = writes.carrying(streams_sent * (FRAME_HEADER + last.len()));
    drop(client);
    Ok(Sent {
        answers,
        released,
        final_writes,
        capped,
    })
}

/// Cuts the burst to the streams whose window holds the whole body, and
/// says so; a stream the server has already closed (it answered before the
/// body, as a refusal does) needs no window: its answer tells.
fn cut_to_window(
    streams: &mut Vec<(ResponseFuture, SendStream<Bytes>)>,
    body_len: usize,
) -> Option<String> {
    let mut fits = 0;
    for (_, send) in streams.iter_mut() {
        if send.capacity() < body_len && !closed_by_server(send) {
            break;
        }
        fits += 1;
    }
    if fits == streams.len() {
        return None;
    }
    let total = streams.len();
    for (_, mut send) in streams.drain(fits..) {
        send.send_reset(h2::Reason::CANCEL);
    }
    Some(format!(
        "the server's flow-control window lets {fits} of {total} bodies out before the release; {fits} were sent"
    ))
}

/// Whether the server has reset the stream (or ended it early), as far as
/// the connection has read; asked without waiting.
fn closed_by_server(send: &mut SendStream<Bytes>) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    send.poll_reset(&mut cx).is_ready()
}

/// The body but its last byte, and that byte (an empty final frame when
/// there is no body: the END_STREAM flag alone completes the request).
fn split_last(body: &Bytes) -> (Bytes, Bytes) {
    match body.len() {
        0 => (Bytes::new(), Bytes::new()),
        n => (body.slice(..n - 1), body.slice(n - 1..)),
    }
}

/// The request as HTTP/2 carries it: the authority in the URI, and none of
/// HTTP/1.1's connection headers.
fn h2_request(scheme: &str, authority: &str, req: &Outgoing) -> Result<hyper::Request<()>> {
    // The user's own Host (`-H 'Host: api.example'`) is the :authority.
    let authority = req
        .headers
        .iter()
        .find(|(name, _)| name == HOST)
        .and_then(|(_, value)| value.to_str().ok())
        .unwrap_or(authority);
    let mut request = hyper::Request::builder()
        .method(req.method.clone())
        .uri(format!("{scheme}://{authority}{}", req.path))
        .version(hyper::Version::HTTP_2);
    for (name, value) in &req.headers {
        if name != HOST && name != CONNECTION && name != TRANSFER_ENCODING {
            request = request.header(name, value);
        }
    }
    request = request.header(
        hyper::header::CONTENT_LENGTH,
        HeaderValue::from(req.body.len()),
    );
    Ok(request.body(())?)
}

/// Reads one stream's answer, up to `max_body` bytes of body.
async fn read_answer(answer: ResponseFuture, authority: &str, max_body: usize) -> Result<Received> {
    let response = answer
        .await
        .map_err(|e| anyhow::anyhow!("{authority} did not answer the stream: {e}"))?;
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| anyhow::anyhow!("{authority} broke off its answer: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if bytes.len() + chunk.len() > max_body {
            return Err(BodyTooLarge {
                place: authority.to_owned(),
                status: parts.status.as_u16(),
                limit: max_body,
            }
            .into());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Received {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: Bytes::from(bytes),
        at: Instant::now(),
    })
}

/// Awaits `work` while driving the connection in this same task. A
/// connection that ends leaves `work` a moment to finish with what had
/// arrived, then fails it: nothing more can arrive.
async fn driving<T, E>(
    conn: &mut H2Connection<Counted, Bytes>,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T>
where
    anyhow::Error: From<E>,
{
    tokio::pin!(work);
    let ended = tokio::select! {
        biased;
        done = &mut work => return done.map_err(anyhow::Error::from),
        ended = &mut *conn => ended,
    };
    match tokio::time::timeout(Duration::from_millis(100), work).await {
        Ok(done) => done.map_err(anyhow::Error::from),
        Err(_) => match ended {
            Err(e) => bail!("the HTTP/2 connection ended: {e}"),
            Ok(()) => bail!("the server closed the connection: does it speak HTTP/2?"),
        },
    }
}

/// An HTTP/2 frame's header: 9 bytes before its payload.
const FRAME_HEADER: usize = 9;

/// The sizes of the writes made after the release mark.
#[derive(Default)]
struct Writes {
    marked: AtomicBool,
    sizes: Mutex<Vec<usize>>,
}

impl Writes {
    fn mark(&self) {
        self.marked.store(true, Ordering::Release);
    }

    fn record(&self, n: usize) {
        if self.marked.load(Ordering::Acquire) {
            self.sizes.lock().unwrap_or_else(|e| e.into_inner()).push(n);
        }
    }

    /// How many writes after the mark it took to carry `bytes`: the final
    /// frames are the first thing written after it.
    fn carrying(&self, bytes: usize) -> usize {
        let sizes = self.sizes.lock().unwrap_or_else(|e| e.into_inner());
        let mut sent = 0;
        for (i, n) in sizes.iter().enumerate() {
            sent += n;
            if sent >= bytes {
                return i + 1;
            }
        }
        sizes.len()
    }
}

impl Observer for Writes {
    fn wrote(&self, bytes: usize) {
        self.record(bytes);
    }
}

/// The stream, counting the writes made after the release mark.
type Counted = Observed<Stream, Arc<Writes>>;
