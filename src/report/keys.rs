//! `idem keys` for people: what each key design did with the same crashing clients.

use std::fmt::Write;

use super::style::{bad, dim, good, judged, strong, warn};
use super::table;
use crate::keys::{CrashPoint, KeyKind, KeysResult};

fn story(r: &KeysResult) -> String {
    let plural = |n: usize, one: &str, many: &str| match n {
        1 => format!("{n} {one}"),
        _ => format!("{n} {many}"),
    };
    let items = [
        plural(r.clients, "client", "clients"),
        format!("{} each", plural(r.intents, "intent", "intents")),
        format!("every attempt but the last crashes {}", r.crash_at.name()),
        plural(r.retries, "retry", "retries"),
    ];
    super::width::join_fitted(&items, super::width::width())
}

fn zero_good(n: u64) -> String {
    if n == 0 {
        good("0").to_string()
    } else {
        bad(n.to_string()).to_string()
    }
}

/// One key kind: the figures, why, and every attempt.
pub fn render(r: &KeysResult) -> String {
    let mut out = String::new();
    let name = match &r.template {
        Some(template) => format!("key = {:?}", template.text()),
        None => r.kind.name().to_string(),
    };
    let _ = writeln!(out, "{} {}", strong("idem keys ·"), strong(name));
    let _ = writeln!(out, "{}\n", dim(story(r)));
    let _ = writeln!(out, "  requests sent     {}", r.attempts_sent);
    let _ = writeln!(out, "  keys used         {}", r.keys_used);
    let _ = writeln!(
        out,
        "  XP rows           {}   {}",
        judged(r.xp_rows, r.xp_rows == r.expected_xp_rows),
        dim(format!("expected {}, one per intent", r.expected_xp_rows))
    );
    let _ = writeln!(out, "  duplicates        {}", zero_good(r.duplicates));
    let _ = writeln!(out, "  merged intents    {}\n", zero_good(r.merged_intents));
    let _ = writeln!(out, "{}\n", why(r));
    let rows = r
        .attempts
        .iter()
        .map(|a| {
            vec![
                a.client.to_string(),
                a.lesson.to_string(),
                a.attempt.to_string(),
                a.key[..8.min(a.key.len())].to_string(),
                a.status.map_or("—".into(), |s| s.to_string()),
                a.did.clone(),
                a.crashed.map_or(String::new(), |c| {
                    warn(format!("crashed {}", c.words())).to_string()
                }),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "client",
            "lesson",
            "attempt",
            "key",
            "status",
            "server did",
            "client",
        ],
        rows,
        &[0, 1, 2],
    ));
    out.push('\n');
    out
}

fn why(r: &KeysResult) -> &'static str {
    if r.crash_at != CrashPoint::BeforeSend && r.template.is_some() {
        return match (r.duplicates, r.merged_intents) {
            (0, 0) => {
                "Every retry made the same key, and no two awards shared one: the server replayed each retry and made each award once."
            }
            (_, 0) => {
                "Retries made new keys, so the server saw them as new requests and did the work again."
            }
            (0, _) => {
                "Retries were recognised, but different awards made the same key and were replayed or rejected instead of made."
            }
            _ => "Retries made new keys, and different awards shared keys: both ways wrong.",
        };
    }
    if r.crash_at == CrashPoint::BeforeSend {
        return "Every crash came before the request left, so the server saw one request per intent \
                whatever the key: it is the crash after the work that a key has to survive.";
    }
    match r.kind {
        KeyKind::Random => {
            "Each restart made a new random key, so the server saw every retry as a new request and did the \
             work again."
        }
        KeyKind::Derived => {
            "The key is made from the operation, the user and the lesson: every retry made the same key, and \
             the server replayed the first result."
        }
        KeyKind::DerivedCoarse => {
            "The key is made from the operation and the user only: retries are recognised, but a second, \
             different award for the same user gets the first award's key and is replayed or rejected \
             instead of made."
        }
    }
}

/// Every key kind side by side.
pub fn render_compare(results: &[KeysResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", strong("idem keys · every key kind side by side"));
    if let Some(first) = results.first() {
        let _ = writeln!(out, "{}\n", dim(story(first)));
    }
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.kind.name().to_string(),
                r.attempts_sent.to_string(),
                r.keys_used.to_string(),
                format!(
                    "{} / {}",
                    judged(r.xp_rows, r.xp_rows == r.expected_xp_rows),
                    r.expected_xp_rows
                ),
                zero_good(r.duplicates),
                zero_good(r.merged_intents),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "key",
            "requests sent",
            "keys used",
            "XP rows / expected",
            "duplicates",
            "merged intents",
        ],
        rows,
        &[1, 2, 3, 4, 5],
    ));
    out.push_str("\n\n");
    // Before-send crashes leave the server nothing to remember: a fresh
    // key on the retry costs nothing, and the table says random works.
    if results
        .first()
        .is_some_and(|r| r.crash_at == crate::keys::CrashPoint::BeforeSend)
    {
        let _ = writeln!(
            out,
            "{}",
            warn(
                "Random keys look right here because each crash came before its request left: \
                 the server never saw the first key, so a fresh one on the retry was a first \
                 request, not a duplicate. Crash after the work (--crash-at after-work, the \
                 default) and the server has done the work under a key the retry no longer \
                 sends."
            )
        );
    }
    let _ = writeln!(
        out,
        "{}",
        dim(
            "A key must be the same for every retry of one intent, and differ between intents: \
             derive it from the fields that identify the intent, not just the operation."
        )
    );
    out
}
