//! A client's byte stream to a server: plain TCP or TLS over it, opened within a time limit, with what a release needs to know of the socket beneath.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Result;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// TCP, or TLS over TCP.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// The application protocol a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Protocol {
    #[serde(rename = "http/1.1")]
    Http11,
    #[serde(rename = "h2")]
    Http2,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http11 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2",
        }
    }
}

/// Opens a stream to `host:port` (`place` names it in messages), with TLS
/// when `tls` is given, all within `timeout`.
pub async fn open(
    host: &str,
    port: u16,
    place: &str,
    tls: Option<Arc<ClientConfig>>,
    timeout: Duration,
) -> Result<Stream> {
    let opening = async {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| anyhow::anyhow!("could not connect to {place}: {e}"))?;
        // Small requests and their final bytes go out at once, not after Nagle's delay.
        let _ = tcp.set_nodelay(true);
        match tls {
            None => Ok(Stream::Plain(tcp)),
            Some(config) => Ok(Stream::Tls(Box::new(
                super::https::connect(config, host, tcp).await?,
            ))),
        }
    };
    tokio::time::timeout(timeout, opening).await.map_err(|_| {
        anyhow::anyhow!(
            "could not connect to {place} within {} ms",
            timeout.as_millis()
        )
    })?
}

impl Stream {
    /// What the stream speaks: HTTP/2 only when TLS's ALPN chose `h2`.
    pub fn negotiated(&self) -> Option<Protocol> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(tls) => match tls.get_ref().1.alpn_protocol() {
                Some(b"h2") => Some(Protocol::Http2),
                Some(_) => Some(Protocol::Http11),
                None => None,
            },
        }
    }

    /// The TCP socket beneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

/// Bytes written to a socket that its peer has not acknowledged yet
/// (`SIOCOUTQ`); `None` if the kernel will not say.
pub fn unacknowledged(fd: RawFd) -> Option<usize> {
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ for TCP) writes one int for an open socket.
    let done = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    (done == 0).then_some(queued.max(0) as usize)
}

/// Bytes that arrived on socket `fd` and were not read yet (FIONREAD).
pub fn unread(fd: RawFd) -> Option<usize> {
    let mut waiting: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int for an open socket.
    let done = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) };
    (done == 0).then_some(waiting.max(0) as usize)
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
