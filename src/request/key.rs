//! The one rule for an idempotency key, whoever gives it (`--key`, a scenario file, an `Idempotency-Key` header): 1 to 255 characters of printable ASCII.
//!
//! The IETF draft makes the key a structured-field string, which holds
//! printable ASCII only; Stripe allows 255 characters. A key checked here is
//! one every transport can carry: in-process, and quoted on the wire.

pub use super::params::MAX_KEY_LEN;

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("this endpoint needs an Idempotency-Key header")]
    Missing,
    #[error("send one Idempotency-Key header, not {0}")]
    Repeated(usize),
    #[error("the Idempotency-Key is empty")]
    Empty,
    #[error("the Idempotency-Key is {0} characters long; at most {MAX_KEY_LEN} are allowed")]
    TooLong(usize),
    #[error("the Idempotency-Key is malformed: {0}")]
    Malformed(&'static str),
}

/// What a key may hold, as [`KeyError::Malformed`] says it.
pub const PRINTABLE_ASCII: &str = "only printable ASCII is allowed";

/// Checks a key's content: not empty, printable ASCII (spaces included),
/// at most [`MAX_KEY_LEN`] characters.
pub fn check(key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if !key.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(KeyError::Malformed(PRINTABLE_ASCII));
    }
    match key.len() {
        n if n > MAX_KEY_LEN => Err(KeyError::TooLong(n)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_key() {
        assert_eq!(check("award-xp-lesson-1"), Ok(()));
        assert_eq!(check("a b \"c\" \\"), Ok(()));
        assert_eq!(check(""), Err(KeyError::Empty));
        assert_eq!(check("é"), Err(KeyError::Malformed(PRINTABLE_ASCII)));
        assert_eq!(check("a\tb"), Err(KeyError::Malformed(PRINTABLE_ASCII)));
        assert_eq!(check(&"k".repeat(MAX_KEY_LEN)), Ok(()));
        assert_eq!(
            check(&"k".repeat(MAX_KEY_LEN + 1)),
            Err(KeyError::TooLong(MAX_KEY_LEN + 1))
        );
    }
}
