//! Request fingerprints (lesson 4): the key names a request, the fingerprint says what it asked.

pub use crate::request::Params;

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
