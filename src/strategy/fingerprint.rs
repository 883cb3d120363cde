//! Request fingerprints (lesson 4): the key names a request, the fingerprint says what it asked.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// What a request asks for. The fields are in a fixed order, so their
/// encoding, and so the fingerprint, is the same wherever it is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Params {
    pub operation: &'static str,
    pub user_id: i64,
    pub amount: i32,
    pub lesson: i32,
}

impl Params {
    /// The canonical encoding: JSON with the fields in declaration order.
    pub fn canonical(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// SHA-256 of the canonical encoding, in hex.
    pub fn fingerprint(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digest = Sha256::digest(self.canonical().as_bytes());
        let mut hex = String::with_capacity(64);
        for byte in digest {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        hex
    }

    /// "10 XP for lesson 1", for messages.
    pub fn describe(&self) -> String {
        format!("{} XP for lesson {}", self.amount, self.lesson)
    }
}

/// True when both fingerprints are known and differ: the key was first
/// used for another request. A missing one (an unchecked guard) never differs.
pub fn differs(asked: Option<&str>, stored: Option<&str>) -> bool {
    matches!((asked, stored), (Some(a), Some(b)) if a != b)
}

/// The 422 body: the key is known, but it meant something else.
pub fn mismatch_body(key: &str) -> serde_json::Value {
    serde_json::json!({
        "error": {
            "type": "idempotency_error",
            "code": "idempotency_key_reused",
            "message": format!("key {key:?} was first used with different parameters"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(amount: i32) -> Params {
        Params {
            operation: "award_xp",
            user_id: 42,
            amount,
            lesson: 1,
        }
    }

    #[test]
    fn the_fingerprint_is_stable_and_tells_parameters_apart() {
        assert_eq!(params(10).fingerprint(), params(10).fingerprint());
        assert_ne!(params(10).fingerprint(), params(20).fingerprint());
        assert_eq!(
            params(10).canonical(),
            r#"{"operation":"award_xp","user_id":42,"amount":10,"lesson":1}"#
        );
        assert_eq!(params(10).fingerprint().len(), 64);
    }
}
