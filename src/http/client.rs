//! A plain HTTP/1.1 client whose connections are opened before the start gate, so that N requests leave together.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{CONTENT_LENGTH, HOST, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Uri};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::wire::REPLAYED_HEADER;

/// The most of a response's body a client reads unless told otherwise.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Where requests go (an `http://` URL, checked once), and how much of an
/// answer is read there.
#[derive(Debug, Clone)]
pub struct Target {
    host: String,
    port: u16,
    authority: String,
    /// The path and query every request is sent to.
    pub path: String,
    /// A longer body is not read: the request is reported as [`BodyTooLarge`].
    pub max_response_bytes: usize,
}

/// A response whose body was longer than the client reads.
#[derive(Debug, thiserror::Error)]
#[error(
    "{place} answered {status} with a body over {limit} bytes; it was not read further (--max-response-bytes)"
)]
pub struct BodyTooLarge {
    pub place: String,
    pub status: u16,
    pub limit: usize,
}

impl Target {
    /// Reads `url`; refuses what this client cannot send (https, credentials in the URL).
    pub fn parse(url: &str) -> Result<Self> {
        let uri: Uri = url.parse().map_err(|_| {
            anyhow::anyhow!("that is not a URL; give one like http://127.0.0.1:8080/path")
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => bail!(
                "https is not supported yet: point idem at a plain-HTTP address of the service (a local or staging port)"
            ),
            Some(other) => bail!("{other}:// is not HTTP; give an http:// URL"),
            None => bail!("the URL has no scheme; give one like http://127.0.0.1:8080/path"),
        }
        let authority = uri.authority().context("the URL has no host")?.clone();
        if authority.as_str().contains('@') {
            bail!(
                "credentials in the URL are not sent; pass them as a header (--header 'Authorization: ...')"
            );
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Self {
            host,
            port: authority.port_u16().unwrap_or(80),
            authority: authority.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }
}

/// A request to send: a method, a path, headers and a body.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

/// A response as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When the last byte of the body arrived.
    pub at: Instant,
}

impl Received {
    /// Whether the response says it is a replay (`Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.headers
            .get(REPLAYED_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// One open HTTP/1.1 connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
    authority: String,
    max_response_bytes: usize,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Opens a connection to `target` within `timeout`.
pub async fn connect(target: &Target, timeout: Duration) -> Result<Connection> {
    let place = target.authority.clone();
    let stream = tokio::time::timeout(
        timeout,
        TcpStream::connect((target.host.as_str(), target.port)),
    )
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "could not connect to {place} within {} ms",
            timeout.as_millis()
        )
    })?
    .map_err(|e| anyhow::anyhow!("could not connect to {place}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .with_context(|| format!("could not speak HTTP to {place}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Connection {
        sender,
        driver,
        authority: place,
        max_response_bytes: target.max_response_bytes,
    })
}

impl Connection {
    /// Sends `req` and reads the whole response, within `timeout`.
    pub async fn send(&mut self, req: &Outgoing, timeout: Duration) -> Result<Received> {
        let place = self.authority.clone();
        let exchange = async {
            let mut request = hyper::Request::builder()
                .method(req.method.clone())
                .uri(req.path.as_str())
                .header(HOST, place.as_str())
                .header(CONTENT_LENGTH, req.body.len());
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

/// One request on a fresh connection: connect, send, read.
pub async fn once(target: &Target, req: &Outgoing, timeout: Duration) -> Result<Received> {
    let started = Instant::now();
    let mut conn = connect(target, timeout).await?;
    conn.send(req, timeout.saturating_sub(started.elapsed()))
        .await
}
