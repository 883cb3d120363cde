//! The HTTP/1.1 last-byte release: each request goes out whole but for its final byte, which waits for the gate; then one loop sends every connection's final byte, back to back.
//!
//! A request released whole reaches the server as fast as each client's
//! task is woken and its bytes cross the stack: tens of microseconds
//! apart per request, more the more there are. Held back to one byte, the
//! whole request is already at the server, parsed up to its last byte, and
//! the release is N one-byte writes from one thread: the server sees N
//! requests complete within the time of N system calls.
//!
//! [`Held`] is the stream hyper writes to: it passes every byte on but the
//! latest, and answers hyper's flush only once the gate has sent that one.
//! [`Trigger`] is the gate's side of the same stream: at the release it
//! takes each final byte (over TLS, sealed ahead into its record), sends
//! them all straight to their sockets in one loop, then wakes the clients.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::{Stream, unacknowledged};

/// What the client's task and the gate share of one connection.
struct Shared {
    io: Stream,
    /// Bytes hyper handed over that are not on the wire yet.
    pending: Vec<u8>,
    /// hyper has asked to flush: the whole request is in hand.
    complete: bool,
    /// The gate has opened: the final byte may go.
    released: bool,
    /// The client's task, waiting for its flush.
    waiting: Option<Waker>,
}

impl Shared {
    /// Writes what may go now: all but the final byte until the release.
    fn drive(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        loop {
            let keep = usize::from(!self.released);
            let ready = self.pending.len().saturating_sub(keep);
            if ready == 0 {
                return Ok(());
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.pending[..ready]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n);
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
    }
}

/// The stream as hyper sees it.
pub struct Held {
    shared: Arc<Mutex<Shared>>,
}

/// The gate's handle on one held connection.
pub struct Trigger {
    shared: Arc<Mutex<Shared>>,
}

/// Wraps `io`: the stream for hyper, and the trigger for the gate.
pub fn hold(io: Stream) -> (Held, Trigger) {
    let shared = Arc::new(Mutex::new(Shared {
        io,
        pending: Vec::new(),
        complete: false,
        released: false,
        waiting: None,
    }));
    (
        Held {
            shared: shared.clone(),
        },
        Trigger { shared },
    )
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl Trigger {
    /// Whether the request is on the wire but for its final byte, and the
    /// peer has acknowledged every byte sent so far.
    pub fn staged(&self) -> bool {
        let shared = lock(&self.shared);
        shared.complete
            && shared.pending.len() == 1
            && unacknowledged(shared.io.raw_fd()) == Some(0)
    }

    /// Takes the final byte out of the client's hands and makes it ready
    /// for the wire: for TLS, already encrypted as a record of its own.
    /// The client is not told; [`Trigger::wake`] does that, after the send.
    fn prepare(&self) -> Ready {
        let mut shared = lock(&self.shared);
        shared.released = true;
        let fd = shared.io.raw_fd();
        // A request not staged in time goes out as the client's own write.
        if shared.pending.len() != 1 {
            return Ready {
                fd,
                bytes: Vec::new(),
            };
        }
        let last = std::mem::take(&mut shared.pending);
        let bytes = match &mut shared.io {
            Stream::Plain(_) => last,
            Stream::Tls(tls) => {
                let session = tls.get_mut().1;
                let mut record = Vec::new();
                let sealed = std::io::Write::write_all(&mut session.writer(), &last)
                    .and_then(|()| session.write_tls(&mut record).map(drop));
                match sealed {
                    Ok(()) => record,
                    // Left to the client's own write, which reports the failure.
                    Err(_) => {
                        shared.pending = last;
                        Vec::new()
                    }
                }
            }
        };
        Ready { fd, bytes }
    }

    /// Tells the client its request is whole: it may read its answer.
    /// Whether the peer has sent anything back that nobody read yet (its
    /// answer, for a request no one is reading).
    pub fn answered(&self) -> bool {
        let shared = lock(&self.shared);
        super::stream::unread(shared.io.raw_fd()).is_some_and(|n| n > 0)
    }

    fn wake(&self) {
        if let Some(waker) = lock(&self.shared).waiting.take() {
            waker.wake();
        }
    }
}

/// One connection's final bytes, ready to go.
struct Ready {
    fd: std::os::fd::RawFd,
    bytes: Vec<u8>,
}

impl Ready {
    /// One non-blocking send; the socket's queue is empty (the request was
    /// staged), so a few bytes always fit. Bytes it did not take are
    /// reported by the client's read failing, as a broken connection is.
    fn send(&self) {
        if self.bytes.is_empty() {
            return;
        }
        // SAFETY: `fd` is an open socket and `bytes` a valid buffer.
        unsafe {
            libc::send(
                self.fd,
                self.bytes.as_ptr().cast(),
                self.bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            );
        }
    }
}

/// Waits until every trigger is staged, for at most `limit`; returns
/// whether all were.
pub async fn all_staged(triggers: &[Trigger], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if triggers.iter().all(Trigger::staged) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Releases every trigger: each final byte (or its TLS record) is made
/// ready first, then all go out in one loop of `send` calls, and only then
/// are the clients woken to read their answers. Returns when the first and
/// the last send were made.
pub fn release_all(triggers: &[Trigger]) -> (Instant, Instant) {
    let ready: Vec<Ready> = triggers.iter().map(Trigger::prepare).collect();
    let first = Instant::now();
    for one in &ready {
        one.send();
    }
    let last = Instant::now();
    for trigger in triggers {
        trigger.wake();
    }
    (first, last)
}

impl AsyncRead for Held {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        Pin::new(&mut shared.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Held {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut shared = lock(&self.shared);
        shared.pending.extend_from_slice(buf);
        shared.drive(cx)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        shared.complete = true;
        shared.drive(cx)?;
        if !shared.released || !shared.pending.is_empty() {
            shared.waiting = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Pin::new(&mut shared.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        Pin::new(&mut shared.io).poll_shutdown(cx)
    }
}
