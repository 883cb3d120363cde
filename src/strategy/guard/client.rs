//! What the guard runs on and for: a connection it can prepare statements on, and one request's key as the key table sees it.
//!
//! Apart from the guard's own logic, so that the claim and completion it
//! shares with claim-work-complete (`strategy/claims.rs`) can name
//! them without reaching into the guard.

use std::future::Future;

use tokio_postgres::Statement;

/// One request, as the guard sees it.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    /// The idempotency key the client sent.
    pub key: &'a str,
    /// The operation, stored beside the key.
    pub operation: &'a str,
    /// A fingerprint of the request's parameters; `None` checks none.
    pub fingerprint: Option<&'a str>,
    /// Who works on the claim. A request that presents the same owner again
    /// (its own retry) resumes its pending claim instead of waiting for it.
    pub owner: i32,
}

/// A connection the guard can run on.
pub trait GuardClient: Send + Sync {
    /// The client itself.
    fn client(&self) -> &tokio_postgres::Client;

    /// A prepared statement for `sql` (from a cache where the client has one).
    fn statement(
        &self,
        sql: &'static str,
    ) -> impl Future<Output = Result<Statement, tokio_postgres::Error>> + Send;
}

impl GuardClient for tokio_postgres::Client {
    fn client(&self) -> &tokio_postgres::Client {
        self
    }

    fn statement(
        &self,
        sql: &'static str,
    ) -> impl Future<Output = Result<Statement, tokio_postgres::Error>> + Send {
        self.prepare(sql)
    }
}

impl GuardClient for deadpool_postgres::ClientWrapper {
    fn client(&self) -> &tokio_postgres::Client {
        self
    }

    fn statement(
        &self,
        sql: &'static str,
    ) -> impl Future<Output = Result<Statement, tokio_postgres::Error>> + Send {
        self.prepare_cached(sql)
    }
}
