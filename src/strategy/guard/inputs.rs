//! What the guard runs on and for: a connection that sends its statements, and one request's key as the key table sees it.
//!
//! Apart from the guard's own logic, so that the claim and completion it
//! shares with claim-work-complete (`strategy/claims.rs`) can name
//! them without reaching into the guard.

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

/// A connection the guard can run on: any that sends idem's statements
/// (a plain tokio-postgres client, a deadpool-postgres one, a race's
/// pooled connection).
pub use crate::db::statements::Sends as GuardClient;
