//! A loopback server that notes when each request's final byte arrived, and in which read: the other end of `idem bench`'s release section, where a release's spread is measured as the server sees it.
//!
//! It speaks just enough of each protocol to find where a request ends and
//! to answer it: HTTP/1.1 by `Content-Length`, HTTP/2 by the END_STREAM
//! flag on a stream's last frame (frames are read by their 9-byte headers;
//! the one response, `:status 200`, is a single byte of HPACK's static
//! table). Over TLS it reads the decrypted stream, so "one read" still
//! means the final frames arrived together.
//!
//! The time of an arrival is the kernel's: each socket asks for receive
//! timestamps (`SO_TIMESTAMPNS`) and reads with `recvmsg`, so the figure is
//! when the bytes reached the machine's TCP stack, not when this server's
//! tasks got round to reading a hundred sockets.

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::http::stream::Protocol;

/// One request's final byte, as the server read it.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// The connection, numbered from 0 in accept order.
    pub connection: usize,
    /// The read on that connection that brought the final byte, from 0.
    pub read: u64,
    /// When the kernel received it, in ns of the real-time clock.
    pub at_ns: i128,
}

/// A running arrival server; stopped when dropped.
pub struct ArrivalServer {
    pub port: u16,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    /// The accepting task, ended with the server.
    _accept: crate::tasks::AbortOnDrop,
}

/// HTTP/2's connection preface, sent by the client first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A frame header: 3 bytes of length, its type, its flags, its stream.
const HEADER_LEN: usize = 9;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// The answer to each HTTP/1.1 request.
const OK_11: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

impl ArrivalServer {
    /// Starts on a free loopback port, with TLS when `tls` is given.
    pub async fn start(speaks: Protocol, tls: Option<TlsAcceptor>) -> Result<Self> {
        Self::start_with(speaks, tls, None).await
    }

    /// [`ArrivalServer::start`], an HTTP/2 server announcing at most
    /// `max_streams` concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub async fn start_with(
        speaks: Protocol,
        tls: Option<TlsAcceptor>,
        max_streams: Option<u32>,
    ) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let noted = arrivals.clone();
        let accept = crate::tasks::AbortOnDrop::spawn(async move {
            let mut connection = 0;
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (noted, tls) = (noted.clone(), tls.clone());
                let number = connection;
                connection += 1;
                let stream = Stamped::new(stream);
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, speaks, max_streams, number, noted).await,
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                serve(stream, speaks, max_streams, number, noted).await;
                            }
                        }
                    }
                });
            }
        });
        Ok(Self {
            port,
            arrivals,
            _accept: accept,
        })
    }

    /// The arrivals so far, taken away.
    pub fn take(&self) -> Vec<Arrival> {
        std::mem::take(&mut *self.arrivals.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// How many arrivals are noted so far.
    pub fn count(&self) -> usize {
        self.arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

async fn serve<T>(
    mut io: T,
    speaks: Protocol,
    max_streams: Option<u32>,
    connection: usize,
    noted: Arc<Mutex<Vec<Arrival>>>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Stamps,
{
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0u64;
    let mut h2 = match speaks {
        Protocol::Http11 => None,
        Protocol::Http2 => Some(H2State::default()),
    };
    if h2.is_some() {
        // Our SETTINGS: every default stands but the stream limit, if any.
        let mut settings = Vec::new();
        if let Some(most) = max_streams {
            settings.extend_from_slice(&MAX_CONCURRENT_STREAMS.to_be_bytes());
            settings.extend_from_slice(&most.to_be_bytes());
        }
        if io
            .write_all(&frame(SETTINGS, 0, 0, &settings))
            .await
            .is_err()
        {
            return;
        }
    }
    loop {
        let n = match io.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let at_ns = io.last_stamp();
        seen.extend_from_slice(&buf[..n]);
        let mut reply = Vec::new();
        let ended = match &mut h2 {
            None => http11_requests(&mut seen, &mut reply),
            Some(state) => match state.frames(&mut seen, &mut reply) {
                Some(ended) => ended,
                None => return,
            },
        };
        if ended > 0 {
            let mut noted = noted.lock().unwrap_or_else(|e| e.into_inner());
            noted.extend((0..ended).map(|_| Arrival {
                connection,
                read,
                at_ns,
            }));
        }
        read += 1;
        if !reply.is_empty() && io.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// A stream that knows when the kernel received the bytes last read.
pub trait Stamps {
    /// ns of the real-time clock; the present time if the kernel gave none.
    fn last_stamp(&self) -> i128;
}

impl<T: Stamps> Stamps for tokio_rustls::server::TlsStream<T> {
    fn last_stamp(&self) -> i128 {
        self.get_ref().0.last_stamp()
    }
}

/// A TCP stream read with `recvmsg`, keeping the receive timestamp.
pub struct Stamped {
    tcp: TcpStream,
    stamp: i128,
}

impl Stamped {
    fn new(tcp: TcpStream) -> Self {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket, option and int.
        unsafe {
            libc::setsockopt(
                tcp.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        Self {
            tcp,
            stamp: now_ns(),
        }
    }

    /// One `recvmsg` into `buf`, with its timestamp if the kernel gave one.
    fn receive(&self, buf: &mut [u8]) -> std::io::Result<(usize, Option<i128>)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u8; 64];
        // SAFETY: an all-zero msghdr is valid; its pointers are set below
        // to live buffers of the sizes given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: the socket is open and `msg` describes valid buffers.
        let n = unsafe { libc::recvmsg(self.tcp.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control buffer recvmsg filled.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    let ts =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                    stamp = Some(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec));
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Ok((n as usize, stamp))
    }
}

impl Stamps for Stamped {
    fn last_stamp(&self) -> i128 {
        self.stamp
    }
}

/// The real-time clock, in ns.
fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl AsyncRead for Stamped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match this
                .tcp
                .try_io(Interest::READABLE, || this.receive(unfilled))
            {
                Ok((n, stamp)) => {
                    this.stamp = stamp.unwrap_or_else(now_ns);
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// Takes whole HTTP/1.1 requests off the front of `seen`, answering each;
/// returns how many ended in what was read.
fn http11_requests(seen: &mut Vec<u8>, reply: &mut Vec<u8>) -> usize {
    let mut ended = 0;
    while let Some(head_end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let end = head_end + 4 + length;
        if seen.len() < end {
            break;
        }
        seen.drain(..end);
        reply.extend_from_slice(OK_11);
        ended += 1;
    }
    ended
}

/// Where an HTTP/2 connection stands.
#[derive(Default)]
struct H2State {
    preface_seen: bool,
}

impl H2State {
    /// Takes whole frames off `seen`, answering what needs an answer;
    /// returns how many streams ended, or `None` when the client is done.
    fn frames(&mut self, seen: &mut Vec<u8>, reply: &mut Vec<u8>) -> Option<usize> {
        if !self.preface_seen {
            if seen.len() < PREFACE.len() {
                return Some(0);
            }
            if &seen[..PREFACE.len()] != PREFACE {
                return None;
            }
            seen.drain(..PREFACE.len());
            self.preface_seen = true;
        }
        let mut ended = 0;
        while seen.len() >= HEADER_LEN {
            let length =
                usize::from(seen[0]) << 16 | usize::from(seen[1]) << 8 | usize::from(seen[2]);
            if seen.len() < HEADER_LEN + length {
                break;
            }
            let (kind, flags) = (seen[3], seen[4]);
            let stream = u32::from_be_bytes([seen[5] & 0x7f, seen[6], seen[7], seen[8]]);
            let payload = seen[HEADER_LEN..HEADER_LEN + length].to_vec();
            seen.drain(..HEADER_LEN + length);
            match kind {
                SETTINGS if flags & ACK == 0 => reply.extend(frame(SETTINGS, ACK, 0, &[])),
                PING if flags & ACK == 0 => reply.extend(frame(PING, ACK, 0, &payload)),
                GOAWAY => return None,
                DATA | HEADERS if flags & END_STREAM != 0 => {
                    // `:status: 200` is entry 8 of HPACK's static table.
                    reply.extend(frame(HEADERS, END_STREAM | END_HEADERS, stream, &[0x88]));
                    ended += 1;
                }
                _ => {}
            }
        }
        Some(ended)
    }
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(HEADER_LEN + len);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http11_requests_end_at_their_length() {
        let mut seen = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab".to_vec();
        let mut reply = Vec::new();
        assert_eq!(http11_requests(&mut seen, &mut reply), 0);
        seen.extend_from_slice(b"cGET / HTTP/1.1\r\n\r\n");
        assert_eq!(http11_requests(&mut seen, &mut reply), 2);
        assert!(seen.is_empty());
    }

    #[test]
    fn h2_streams_end_with_their_flag() {
        let mut state = H2State::default();
        let mut seen = PREFACE.to_vec();
        seen.extend(frame(SETTINGS, 0, 0, &[]));
        seen.extend(frame(HEADERS, END_HEADERS, 1, &[0x83]));
        seen.extend(frame(DATA, 0, 1, b"ab"));
        let mut reply = Vec::new();
        assert_eq!(state.frames(&mut seen, &mut reply), Some(0));
        seen.extend(frame(DATA, END_STREAM, 1, b"c"));
        seen.extend(frame(DATA, END_STREAM, 3, b"c"));
        assert_eq!(state.frames(&mut seen, &mut reply), Some(2));
        assert!(seen.is_empty());
    }
}
