//! Who is calling, and whether an idempotency key is scoped by it: the same key from two callers is two keys, or one shared (and leaked) answer.
//!
//! The course's app has no login, so any `Authorization` value names a
//! caller (a token is a caller). The key table then holds the key under a
//! short digest of it, so that no credential is ever stored or shown.

use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Whether a key means the same request whoever sends it (`--key-scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyScope {
    /// One key for everyone: caller B sending caller A's key gets A's
    /// stored response (the leak).
    #[default]
    Global,
    /// Each caller's keys are their own, as Stripe scopes keys by account.
    Caller,
}

impl KeyScope {
    /// As `--key-scope` spells it.
    pub fn name(self) -> &'static str {
        match self {
            KeyScope::Global => "global",
            KeyScope::Caller => "caller",
        }
    }

    /// The key as the key table keeps it: as sent, or under the caller's
    /// digest (`anonymous` without an `Authorization` header).
    pub fn key_of(self, headers: &HeaderMap, key: String) -> String {
        match self {
            KeyScope::Global => key,
            KeyScope::Caller => format!("{}/{key}", caller_of(headers)),
        }
    }
}

/// The caller, as the first 16 hex digits of its `Authorization` value's
/// SHA-256: the same token, the same caller; never the token itself.
fn caller_of(headers: &HeaderMap) -> String {
    match headers.get(AUTHORIZATION) {
        Some(token) => {
            let digest = Sha256::digest(token.as_bytes());
            digest[..8].iter().map(|b| format!("{b:02x}")).collect()
        }
        None => "anonymous".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_caller(token: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(token) = token {
            headers.insert(AUTHORIZATION, token.parse().unwrap());
        }
        headers
    }

    #[test]
    fn a_caller_scoped_key_is_each_callers_own_and_shows_no_token() {
        let (a, b) = (as_caller(Some("Bearer a")), as_caller(Some("Bearer b")));
        let scope = KeyScope::Caller;
        assert_ne!(scope.key_of(&a, "k".into()), scope.key_of(&b, "k".into()));
        assert_eq!(scope.key_of(&a, "k".into()), scope.key_of(&a, "k".into()));
        assert!(!scope.key_of(&a, "k".into()).contains("Bearer"));
        assert_eq!(scope.key_of(&as_caller(None), "k".into()), "anonymous/k");
        assert_eq!(KeyScope::Global.key_of(&a, "k".into()), "k");
    }
}
