//! The client idem's races and probes send with: where requests go (`http://` or `https://`, and how), connections opened before a start gate, and one request on its own over HTTP/1.1 or HTTP/2.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{CONTENT_LENGTH, HOST};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};

pub use super::https::{Offer, Trust};
pub use super::message::{BodyTooLarge, Outgoing, Received};
use super::stream::{Protocol, Stream};

/// The most of a response's body a client reads unless told otherwise.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = crate::limits::MAX_RESPONSE_BYTES.default() as usize;

/// How a client reaches its target beyond the URL: which certificates it
/// trusts, which protocols it offers, and whether a cleartext URL speaks
/// HTTP/2 from the first byte (`--http2-prior-knowledge`).
#[derive(Debug, Clone)]
pub struct Reach {
    pub trust: Trust,
    pub offer: Offer,
    pub prior_knowledge: bool,
}

impl Default for Reach {
    fn default() -> Self {
        Self {
            trust: Trust::System,
            offer: Offer::Both,
            prior_knowledge: false,
        }
    }
}

/// Where requests go (an `http://` or `https://` URL, checked once), how
/// they get there, and how much of an answer is read.
#[derive(Clone)]
pub struct Target {
    host: String,
    port: u16,
    authority: String,
    /// The path and query every request is sent to.
    pub path: String,
    /// A longer body is not read: the request is reported as [`BodyTooLarge`].
    pub(crate) max_response_bytes: usize,
    /// For `https://`: the TLS configuration, offering [`Reach::offer`].
    tls: Option<Arc<ClientConfig>>,
    /// `http://` spoken as HTTP/2 from the start.
    prior_knowledge: bool,
    /// `--insecure`: certificates were not checked.
    pub(crate) unverified: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("authority", &self.authority)
            .field("path", &self.path)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Target {
    /// Reads `url` for the default reach (the system's roots, ALPN's choice).
    pub fn parse(url: &str) -> Result<Self> {
        Self::parse_with(url, &Reach::default())
    }

    /// Reads `url`; refuses what no client should send (credentials in the
    /// URL) and reach settings that do not fit the scheme.
    pub fn parse_with(url: &str, reach: &Reach) -> Result<Self> {
        let uri: Uri = url.parse().map_err(|_| {
            anyhow::anyhow!("that is not a URL; give one like http://127.0.0.1:8080/path")
        })?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => bail!("{other}:// is not HTTP; give an http:// or https:// URL"),
            None => bail!("the URL has no scheme; give one like http://127.0.0.1:8080/path"),
        };
        let authority = uri.authority().context("the URL has no host")?.clone();
        if authority.as_str().contains('@') {
            bail!(
                "credentials in the URL are not sent; pass them as a header (--header 'Authorization: ...')"
            );
        }
        if https && reach.prior_knowledge {
            bail!(
                "--http2-prior-knowledge is for http:// URLs; over https, --http2 asks for HTTP/2"
            );
        }
        if !https && reach.offer == Offer::Http2 && !reach.prior_knowledge {
            bail!(
                "--http2 asks for HTTP/2 in TLS's ALPN; for http://, give --http2-prior-knowledge"
            );
        }
        let tls = match https {
            true => Some(super::https::client_config(&reach.trust, reach.offer)?),
            false => None,
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Self {
            host,
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            unverified: https && reach.trust == Trust::Nothing,
            tls,
            prior_knowledge: reach.prior_knowledge,
        })
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// `host:port` as the URL gave it.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Opens a stream to the target (TLS included), within `timeout`.
    pub async fn open(&self, timeout: Duration) -> Result<Stream> {
        super::stream::open(
            &self.host,
            self.port,
            &self.authority,
            self.tls.clone(),
            timeout,
        )
        .await
    }

    /// What `stream`, opened to this target, speaks.
    pub fn protocol_of(&self, stream: &Stream) -> Protocol {
        match (self.prior_knowledge, stream.negotiated()) {
            (true, _) | (_, Some(Protocol::Http2)) => Protocol::Http2,
            _ => Protocol::Http11,
        }
    }
}

/// One open HTTP/1.1 connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// The connection's driver, aborted (the connection closed) with it.
    _driver: crate::tasks::AbortOnDrop,
    authority: String,
    max_response_bytes: usize,
}

/// Opens an HTTP/1.1 connection to `target` within `timeout`.
pub async fn connect(target: &Target, timeout: Duration) -> Result<Connection> {
    let stream = target.open(timeout).await?;
    Connection::over(stream, target).await
}

impl Connection {
    /// Speaks HTTP/1.1 to `target` over `io`, a stream already open to it.
    pub async fn over<T>(io: T, target: &Target) -> Result<Connection>
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let place = target.authority.clone();
        let (sender, connection) = http1::handshake(TokioIo::new(io))
            .await
            .with_context(|| format!("could not speak HTTP to {place}"))?;
        let driver = crate::tasks::AbortOnDrop::spawn(async move {
            let _ = connection.await;
        });
        Ok(Connection {
            sender,
            _driver: driver,
            authority: place,
            max_response_bytes: target.max_response_bytes,
        })
    }
}

impl Connection {
    /// Sends `req` and reads the whole response, within `timeout`.
    pub async fn send(&mut self, req: &Outgoing, timeout: Duration) -> Result<Received> {
        let place = self.authority.clone();
        let exchange = async {
            let mut request = hyper::Request::builder()
                .method(req.method.clone())
                .uri(req.path.as_str())
                .header(CONTENT_LENGTH, req.body.len());
            // The user's own Host (`-H 'Host: api.example'`) replaces the URL's.
            if !req.headers.iter().any(|(name, _)| name == HOST) {
                request = request.header(HOST, place.as_str());
            }
            for (name, value) in &req.headers {
                request = request.header(name, value);
            }
            let request = request
                .body(Full::new(req.body.clone()))
                .context("could not build the request")?;
            self.sender.ready().await.map_err(|e| {
                anyhow::anyhow!(
                    "{place} did not answer in HTTP: it closed the connection before it was asked anything ({})",
                    hyper_reason(&e)
                )
            })?;
            let response = self.sender.send_request(request).await.map_err(|e| {
                anyhow::anyhow!("{place} did not answer in HTTP: {}", hyper_reason(&e))
            })?;
            let (parts, body) = response.into_parts();
            let limit = self.max_response_bytes;
            let body = Limited::new(body, limit)
                .collect()
                .await
                .map_err(|e| match e.downcast::<hyper::Error>() {
                    Ok(e) => anyhow::anyhow!("{place} broke off its answer: {}", hyper_reason(&e)),
                    Err(_) => BodyTooLarge {
                        place: place.clone(),
                        status: parts.status.as_u16(),
                        limit,
                    }
                    .into(),
                })?;
            let body = body.to_bytes();
            anyhow::Ok(Received {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
                at: Instant::now(),
            })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| {
            anyhow::anyhow!("{place} did not answer within {} ms", timeout.as_millis())
        })?
    }
}

/// hyper's error with its cause, in a few words.
fn hyper_reason(err: &hyper::Error) -> String {
    use std::error::Error;
    match err.source() {
        Some(cause) => format!("{err} ({cause})"),
        None => err.to_string(),
    }
}

/// Sends `req` over HTTP/1.1 on a fresh connection, keeps the connection
/// `linger` longer without reading, then hangs up, as a client that times
/// out does. The request is held at its final byte until the server has
/// every byte before it, then that byte goes out. Returns whether the
/// server had answered before the hang-up (then it was no abort).
pub async fn hang_up_after_sending(
    target: &Target,
    req: &Outgoing,
    linger: Duration,
    timeout: Duration,
) -> Result<bool> {
    let stream = target.open(timeout).await?;
    if target.protocol_of(&stream) == Protocol::Http2 {
        bail!(
            "{} chose HTTP/2; a hang-up is sent over HTTP/1.1",
            target.authority
        );
    }
    let (held, trigger) = super::last_byte::hold(stream);
    let mut conn = Connection::over(held, target).await?;
    let triggers = std::slice::from_ref(&trigger);
    tokio::select! {
        answered = conn.send(req, timeout) => {
            bail!("{} answered before the request was whole: {}", target.authority,
                answered.map_or_else(|e| e.to_string(), |r| r.status.to_string()))
        }
        staged = super::last_byte::all_staged(triggers, timeout) => {
            if !staged {
                bail!("{} did not take the request within {} ms", target.authority, timeout.as_millis());
            }
        }
    }
    // hyper's side goes first; the trigger still holds the socket, sends
    // the final byte, and closes it as it is dropped.
    drop(conn);
    super::last_byte::release_all(triggers);
    tokio::time::sleep(linger).await;
    let answered = trigger.answered();
    drop(trigger);
    Ok(answered)
}

/// One request on a fresh connection: connect, send, read; over HTTP/2
/// when the target speaks it.
pub async fn once(target: &Target, req: &Outgoing, timeout: Duration) -> Result<Received> {
    let started = Instant::now();
    let stream = target.open(timeout).await?;
    let left = timeout.saturating_sub(started.elapsed());
    if target.protocol_of(&stream) == Protocol::Http2 {
        let sent = super::single_packet::burst(
            stream,
            target.scheme(),
            &target.authority,
            req,
            1,
            left,
            target.max_response_bytes,
        )
        .await?;
        return sent
            .answers
            .into_iter()
            .next()
            .context("the HTTP/2 connection sent no request")?;
    }
    let mut conn = Connection::over(stream, target).await?;
    conn.send(req, left).await
}
