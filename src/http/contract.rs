//! What both ends of the wire agree on: the `Idempotency-Key` header, problem bodies, and how a response reads as an outcome.

use serde_json::{Value, json};

use crate::request::Outcome;
pub use crate::request::key::KeyError;
use crate::request::key::{self, PRINTABLE_ASCII};

/// The request header that carries the key (IETF draft, Stripe).
pub const KEY_HEADER: &str = "idempotency-key";

/// The response header a replay carries (Stripe's name).
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A header idem's own clients send so that the app's bookkeeping
/// (`worker` columns, traces) names them as a race does. Optional.
pub const WORKER_HEADER: &str = "idem-worker";

/// Which of the app's replicas (`--replicas`) answered, from 1.
pub const REPLICA_HEADER: &str = "idem-replica";

/// RFC 9457's media type for problem details.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The largest request body the app reads.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Reads the key from the header's values: the draft's structured-field
/// string (`"abc"`, with `\"` and `\\` escapes) or a bare token (`abc`),
/// printable ASCII either way, at most [`crate::request::MAX_KEY_LEN`] characters.
pub fn parse_key<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Result<String, KeyError> {
    let Some(raw) = values.next() else {
        return Err(KeyError::Missing);
    };
    let more = values.count();
    if more > 0 {
        return Err(KeyError::Repeated(more + 1));
    }
    let raw = trim(raw);
    let key = match raw {
        [b'"', inner @ .., b'"'] => unquote(inner)?,
        [b'"', ..] => return Err(KeyError::Malformed("a quoted key must end with a quote")),
        token => {
            if let Some(bad) = token
                .iter()
                .find(|b| !(0x21..=0x7e).contains(*b) || matches!(b, b'"' | b'\\' | b','))
            {
                return Err(KeyError::Malformed(match bad {
                    b' ' | b'\t' => "a bare key cannot hold spaces; quote it",
                    b'"' | b'\\' | b',' => {
                        "a bare key cannot hold quotes, backslashes or commas; quote it"
                    }
                    _ => PRINTABLE_ASCII,
                }));
            }
            String::from_utf8_lossy(token).into_owned()
        }
    };
    key::check(&key)?;
    Ok(key)
}

fn trim(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &raw[start..end]
}

/// The inside of an sf-string: printable ASCII, `\"` and `\\` the only escapes.
fn unquote(inner: &[u8]) -> Result<String, KeyError> {
    let mut key = String::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e @ (b'"' | b'\\')) => key.push(char::from(e)),
                _ => return Err(KeyError::Malformed("only \\\" and \\\\ may be escaped")),
            },
            b'"' => {
                return Err(KeyError::Malformed(
                    "a quote inside the key must be escaped",
                ));
            }
            0x20..=0x7e => key.push(char::from(b)),
            _ => return Err(KeyError::Malformed(PRINTABLE_ASCII)),
        }
    }
    Ok(key)
}

/// The key as the draft puts it on the wire: an sf-string.
pub fn quote_key(key: &str) -> String {
    let mut quoted = String::with_capacity(key.len() + 2);
    quoted.push('"');
    for c in key.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// A problem details body (RFC 9457) with a machine-readable `code`.
pub fn problem(status: u16, code: &str, detail: &str) -> Value {
    json!({
        "type": "about:blank",
        "title": title(status),
        "status": status,
        "code": code,
        "detail": detail,
    })
}

/// The reason phrase of the statuses the app answers with.
pub fn title(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// The problem code the app gives an error outcome, so that a client can
/// tell a failed award from a database error, which share status 500.
pub fn error_code(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Conflict => "idempotency_key_in_use",
        Outcome::Mismatch => "idempotency_key_reused",
        Outcome::Failed => "work_failed",
        Outcome::CheckoutTimeout => "no_free_connection",
        _ => "database_error",
    }
}

/// How a response reads as an outcome, from what a client sees: the
/// status, the replay header and, for 500, the problem's code. Whether a
/// 201 was duplicate work only the database can tell (by counting).
pub fn outcome_of(status: u16, replayed: bool, body: Option<&Value>) -> Outcome {
    let code = body.and_then(|b| b.get("code")).and_then(Value::as_str);
    match status {
        500 if replayed || code == Some("work_failed") => Outcome::Failed,
        200..=299 if replayed => Outcome::Replayed,
        200..=299 => Outcome::Created,
        409 => Outcome::Conflict,
        422 => Outcome::Mismatch,
        503 => Outcome::CheckoutTimeout,
        _ => Outcome::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::MAX_KEY_LEN;

    fn key(raw: &str) -> Result<String, KeyError> {
        parse_key(std::iter::once(raw.as_bytes()))
    }

    #[test]
    fn keys_in_both_forms() {
        assert_eq!(key("\"8e03978e\"").unwrap(), "8e03978e");
        assert_eq!(key("8e03978e").unwrap(), "8e03978e");
        assert_eq!(key(" \"a b\" ").unwrap(), "a b");
        assert_eq!(key(r#""say \"hi\" \\ o""#).unwrap(), r#"say "hi" \ o"#);
        assert_eq!(
            key(&quote_key(r#"say "hi" \ o"#)).unwrap(),
            r#"say "hi" \ o"#
        );
    }

    #[test]
    fn keys_refused() {
        assert_eq!(parse_key(std::iter::empty()), Err(KeyError::Missing));
        assert_eq!(
            parse_key([b"a".as_slice(), b"b".as_slice()].into_iter()),
            Err(KeyError::Repeated(2))
        );
        assert_eq!(key("\"\""), Err(KeyError::Empty));
        assert_eq!(key(""), Err(KeyError::Empty));
        assert!(matches!(key("\"abc"), Err(KeyError::Malformed(_))));
        assert!(matches!(key("a b"), Err(KeyError::Malformed(_))));
        assert!(matches!(key(r#""a\nb""#), Err(KeyError::Malformed(_))));
        assert!(matches!(key("\"é\""), Err(KeyError::Malformed(_))));
        assert_eq!(
            key(&"k".repeat(MAX_KEY_LEN)).map(|k| k.len()),
            Ok(MAX_KEY_LEN)
        );
        assert_eq!(
            key(&"k".repeat(MAX_KEY_LEN + 1)),
            Err(KeyError::TooLong(MAX_KEY_LEN + 1))
        );
    }

    #[test]
    fn statuses_read_as_outcomes() {
        assert_eq!(outcome_of(201, false, None), Outcome::Created);
        assert_eq!(outcome_of(201, true, None), Outcome::Replayed);
        assert_eq!(outcome_of(409, false, None), Outcome::Conflict);
        assert_eq!(outcome_of(422, false, None), Outcome::Mismatch);
        let failed = problem(500, "work_failed", "x");
        assert_eq!(outcome_of(500, false, Some(&failed)), Outcome::Failed);
        assert_eq!(outcome_of(500, false, None), Outcome::Error);
        assert_eq!(outcome_of(503, false, None), Outcome::CheckoutTimeout);
    }
}
