//! Named parameters (`$key`, `$claim_id`) turned into PostgreSQL's `$1, $2`, each with its type, or into MySQL's `?`.
//!
//! The scan knows enough SQL to leave alone what is not a parameter: text
//! in quotes, dollar-quoted text (`$$...$$`, `$tag$...$tag$`) and comments;
//! for MySQL, identifiers in backticks and `#` comments too.

use tokio_postgres::types::Type;

/// A value a request gives its statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// The Idempotency-Key.
    Key,
    /// The operation the key is for (`award_xp`).
    Operation,
    /// The request's fingerprint: a hash of what it asks for (lesson 4).
    Fingerprint,
    UserId,
    Amount,
    Lesson,
    /// The request's worker number: who owns a claim.
    Worker,
    /// The race's stale-claim timeout (`--stale-after-ms`), in ms.
    StaleAfterMs,
    /// The XP row the work made.
    XpId,
    /// The response the work answers with, to store for replays.
    Response,
    /// Its status code (201).
    ResponseCode,
    /// The id the claim step returned.
    ClaimId,
}

impl Param {
    pub const ALL: [Param; 12] = [
        Param::Key,
        Param::Operation,
        Param::Fingerprint,
        Param::UserId,
        Param::Amount,
        Param::Lesson,
        Param::Worker,
        Param::StaleAfterMs,
        Param::XpId,
        Param::Response,
        Param::ResponseCode,
        Param::ClaimId,
    ];

    /// What a request asks for: all a fingerprint step may name.
    pub const ASKS: [Param; 4] = [
        Param::Operation,
        Param::UserId,
        Param::Amount,
        Param::Lesson,
    ];

    /// How many of [`Param::ALL`] a request knows before its work: up to
    /// `$stale_after_ms`.
    pub const ASKED: usize = 8;

    /// How many it knows after its work: up to `$response_code`.
    pub const WORKED: usize = 11;

    pub fn name(self) -> &'static str {
        match self {
            Param::Key => "key",
            Param::Operation => "operation",
            Param::Fingerprint => "fingerprint",
            Param::UserId => "user_id",
            Param::Amount => "amount",
            Param::Lesson => "lesson",
            Param::Worker => "worker",
            Param::StaleAfterMs => "stale_after_ms",
            Param::XpId => "xp_id",
            Param::Response => "response",
            Param::ResponseCode => "response_code",
            Param::ClaimId => "claim_id",
        }
    }

    /// The type it is sent as.
    pub fn ty(self) -> Type {
        match self {
            Param::Key | Param::Operation | Param::Fingerprint => Type::TEXT,
            Param::UserId | Param::StaleAfterMs | Param::XpId | Param::ClaimId => Type::INT8,
            Param::Amount | Param::Lesson | Param::Worker | Param::ResponseCode => Type::INT4,
            Param::Response => Type::JSONB,
        }
    }

    /// The parameter `name` names; `lock_timeout_ms`, the old name of
    /// `stale_after_ms`, is still read.
    fn named(name: &str) -> Option<Param> {
        match name {
            "lock_timeout_ms" => Some(Param::StaleAfterMs),
            _ => Param::ALL.into_iter().find(|p| p.name() == name),
        }
    }
}

/// A statement with positional parameters, and what each stands for.
#[derive(Debug, PartialEq)]
pub struct Positional {
    pub text: String,
    pub params: Vec<Param>,
}

/// What is wrong with a statement's parameters, and at which byte.
#[derive(Debug, PartialEq)]
pub struct Misnamed {
    pub at: usize,
    pub message: String,
}

/// How a statement's positional parameters are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// PostgreSQL's `$1, $2`: the same name twice is the same `$n`.
    Numbered,
    /// MySQL's `?`: one per place, so a name used twice is bound twice.
    Question,
}

/// `sql` with each `$name` replaced by `$n`; the same name twice is the
/// same `$n`. A name must be one of `allowed`.
pub fn positional(sql: &str, allowed: &[Param]) -> Result<Positional, Misnamed> {
    written(sql, allowed, Style::Numbered)
}

/// `sql` with each `$name` replaced as `style` writes a parameter; the
/// params list what each stands for, in order. A name must be one of
/// `allowed`.
pub fn written(sql: &str, allowed: &[Param], style: Style) -> Result<Positional, Misnamed> {
    let bytes = sql.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = String::with_capacity(sql.len());
    let mut params: Vec<Param> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &sql[i..];
        // Quoted text and comments pass through whole.
        let mysql = style == Style::Question;
        let skip = if rest.starts_with('\'')
            || rest.starts_with('"')
            || (mysql && rest.starts_with('`'))
        {
            let quote = &rest[..1];
            rest[1..].find(quote).map_or(rest.len(), |end| end + 2)
        } else if rest.starts_with("--") || (mysql && rest.starts_with('#')) {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            rest.find("*/").map_or(rest.len(), |end| end + 2)
        } else {
            0
        };
        if skip > 0 {
            out.push_str(&rest[..skip]);
            i += skip;
            continue;
        }
        if bytes[i] == b'$' && (i == 0 || !ident(bytes[i - 1])) {
            let name_len = rest[1..].bytes().take_while(|&c| ident(c)).count();
            let name = &rest[1..1 + name_len];
            if rest[1 + name_len..].starts_with('$') {
                // A dollar quote: `$$` or `$tag$`, to the same tag again.
                let tag = &rest[..name_len + 2];
                let end = rest[tag.len()..]
                    .find(tag)
                    .map_or(rest.len(), |end| tag.len() + end + tag.len());
                out.push_str(&rest[..end]);
                i += end;
                continue;
            }
            if name.bytes().next().is_some_and(|c| c.is_ascii_digit()) {
                return Err(Misnamed {
                    at: i,
                    message: format!("${name}: name the parameter (one of {})", names(allowed)),
                });
            }
            if !name.is_empty() {
                let Some(param) = Param::named(name).filter(|p| allowed.contains(p)) else {
                    let why = match Param::named(name) {
                        Some(_) => "is not known at this step",
                        None => "is not a parameter idem gives",
                    };
                    return Err(Misnamed {
                        at: i,
                        message: format!("${name} {why}; this step takes {}", names(allowed)),
                    });
                };
                match style {
                    Style::Question => {
                        params.push(param);
                        out.push('?');
                    }
                    Style::Numbered => {
                        let n = match params.iter().position(|p| *p == param) {
                            Some(at) => at + 1,
                            None => {
                                params.push(param);
                                params.len()
                            }
                        };
                        out.push_str(&format!("${n}"));
                    }
                }
                i += 1 + name_len;
                continue;
            }
        }
        let len = rest.chars().next().map_or(1, char::len_utf8);
        out.push_str(&rest[..len]);
        i += len;
    }
    Ok(Positional { text: out, params })
}

/// The names `$a, $b, ...`, as a message lists them.
fn names(allowed: &[Param]) -> String {
    allowed
        .iter()
        .map(|p| format!("${}", p.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Param] = &Param::ALL;

    #[test]
    fn what_is_known_before_and_after_the_work_ends_where_it_says() {
        assert_eq!(Param::ALL[Param::ASKED - 1], Param::StaleAfterMs);
        assert_eq!(Param::ALL[Param::WORKED - 1], Param::ResponseCode);
        assert_eq!(Param::ALL.last(), Some(&Param::ClaimId));
    }

    #[test]
    fn names_become_numbers_in_order_of_first_use() {
        let p = positional(
            "UPDATE t SET body = $response WHERE id = $claim_id AND worker = $worker OR id = $claim_id",
            ALL,
        )
        .unwrap();
        assert_eq!(
            p.text,
            "UPDATE t SET body = $1 WHERE id = $2 AND worker = $3 OR id = $2"
        );
        assert_eq!(p.params, [Param::Response, Param::ClaimId, Param::Worker]);
    }

    #[test]
    fn quotes_comments_and_dollar_quotes_are_left_alone() {
        let sql = "SELECT '$key', \"$key\", $$ $key $$, $t$ $key $t$ -- $key\n /* $key */ $key";
        let p = positional(sql, ALL).unwrap();
        assert_eq!(
            p.text,
            "SELECT '$key', \"$key\", $$ $key $$, $t$ $key $t$ -- $key\n /* $key */ $1"
        );
        assert_eq!(p.params, [Param::Key]);
    }

    #[test]
    fn for_mysql_each_place_is_a_question_mark_and_backticks_are_left_alone() {
        let p = written(
            "SELECT `$key` FROM t WHERE k = $key AND w = $worker OR k = $key # $key",
            ALL,
            Style::Question,
        )
        .unwrap();
        assert_eq!(
            p.text,
            "SELECT `$key` FROM t WHERE k = ? AND w = ? OR k = ? # $key"
        );
        assert_eq!(p.params, [Param::Key, Param::Worker, Param::Key]);
    }

    #[test]
    fn an_unknown_or_early_name_and_a_number_are_refused_where_they_stand() {
        let err = positional("SELECT 1 WHERE k = $kee", ALL).unwrap_err();
        assert_eq!(err.at, 19);
        assert!(
            err.message
                .starts_with("$kee is not a parameter idem gives")
        );
        let err = positional("SELECT $claim_id", &[Param::Key]).unwrap_err();
        assert_eq!(
            err.message,
            "$claim_id is not known at this step; this step takes $key"
        );
        let err = positional("SELECT $1", &[Param::Key]).unwrap_err();
        assert!(err.message.starts_with("$1: name the parameter"));
    }
}
