//! The guard's transaction, rolled back if the guard's future is dropped before it ends: a request that goes away never leaves its client inside a transaction.
//!
//! A future can be dropped at any await (the client hung up, its HTTP/2
//! stream was reset, a timeout fired). The guard runs on the caller's
//! client, which it cannot close, so when it is dropped between `BEGIN` and
//! the end of its transaction it queues a `ROLLBACK` on that client before
//! it is gone. tokio-postgres hands a request to its connection on the
//! future's first poll (the same property that lets the guard send two
//! statements in one round trip), so polling the `ROLLBACK` once, with a
//! waker that does nothing, is enough: it goes out on the wire after
//! whatever the dropped future had already sent, and before anything the
//! client's next user sends. A pool that gets the client back hands out a
//! connection whose transaction is already on its way to being rolled back.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};

/// A transaction the guard has begun (or is about to begin) on `client`.
pub(super) struct OpenTransaction<'c> {
    client: Option<&'c tokio_postgres::Client>,
}

impl<'c> OpenTransaction<'c> {
    /// Armed from here on: dropped before [`OpenTransaction::ended`], it
    /// rolls the transaction back.
    pub(super) fn begin(client: &'c tokio_postgres::Client) -> Self {
        Self {
            client: Some(client),
        }
    }

    /// The guard's own code ended the transaction (COMMIT or ROLLBACK, or
    /// an error after which it sent one): nothing is left to do.
    pub(super) fn ended(mut self) {
        self.client = None;
    }
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let mut rollback = pin!(client.batch_execute("ROLLBACK"));
            // Sent on this first poll; its answer is of no interest.
            let _ = rollback
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
        }
    }
}
