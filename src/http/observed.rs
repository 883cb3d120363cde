//! A stream that tells an observer how many bytes each read and write moved: how the app's front door sees a connection idle, and how the single-packet release counts the writes that carried its final frames.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Told of the bytes a stream moved (those it read, and how many it
/// wrote); both default to nothing.
pub trait Observer {
    fn read(&self, _bytes: &[u8]) {}
    fn wrote(&self, _bytes: usize) {}
}

impl<O: Observer> Observer for std::sync::Arc<O> {
    fn read(&self, bytes: &[u8]) {
        (**self).read(bytes);
    }

    fn wrote(&self, bytes: usize) {
        (**self).wrote(bytes);
    }
}

/// `io`, observed by `observer`.
pub struct Observed<T, O> {
    pub(crate) io: T,
    pub(crate) observer: O,
}

impl<T: AsyncRead + Unpin, O: Observer + Unpin> AsyncRead for Observed<T, O> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let read = &buf.filled()[before..];
        if !read.is_empty() {
            self.observer.read(read);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin, O: Observer + Unpin> AsyncWrite for Observed<T, O> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.observer.wrote(n);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.observer.wrote(n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
