//! The failure classes real guards shipped in 2026, as conformance cases: two key headers in one request, a client's own replay marker, the same key under another query string, and distinct keys served one at a time.
//!
//! Each runs on a key of its own and is PASS, FAIL or n/a with what it saw,
//! like the draft's cases beside it; [`super::cases::CASES`] runs them.

use anyhow::Result;
use hyper::header::{HeaderName, HeaderValue};

use super::Probe;
use super::cases::names;
use super::conformance::{Check, effects_words, status_of};
use super::shot::Shot;
use crate::http::contract::{KEY_HEADER, quote_key};

/// The query string the "another query string" case adds to the first request.
pub const OTHER_QUERY: &str = "idem_probe_dry_run=1";

/// The profile's "after a failed effect": a request whose effect fails
/// (the sink answers its call 500), then the same key again. `Some(true)`
/// when the retry got the stored failure back and made no call, `Some(false)`
/// when it called again; `None` when the API did not fail the first request.
pub async fn after_a_failed_effect(
    probe: &Probe,
    key_base: &str,
    sink: &super::SinkCounter,
) -> Option<bool> {
    let key = format!("{key_base}-failed-effect");
    sink.fail_next_call();
    let first = probe.once(Some(&key), &probe.body).await;
    if first.succeeded() || first.status.is_none() {
        return None;
    }
    let calls = sink.count();
    let retry = probe.once(Some(&key), &probe.body).await;
    let called_again = sink.count() > calls;
    let replayed = !called_again && retry.status == first.status && retry.body == first.body;
    (replayed || called_again).then_some(replayed)
}

pub(super) const ENDPOINT: &str = "never this endpoint's stored response";

/// The same key and body sent to a second endpoint after the first
/// completed: a key not scoped by method and path answers it with the
/// first endpoint's response, and the second operation never runs.
pub(super) async fn another_endpoint(
    probe: &Probe,
    key_base: &str,
    other: &Probe,
) -> Result<Check> {
    let case = names::ANOTHER_ENDPOINT;
    let key = format!("{key_base}-endpoint");
    let first = probe.once(Some(&key), &probe.body).await;
    if !first.succeeded() {
        let saw = format!(
            "the first endpoint got {}, not a success",
            status_of(&first)
        );
        return Ok(Check::not_applicable(case, ENDPOINT, saw));
    }
    let before = probe.count().await?;
    let second = other.once(Some(&key), &probe.body).await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let borrowed = second.succeeded()
        && second.body == first.body
        && (second.replayed || effects.is_none_or(|e| e == 0));
    Ok(Check::judged(
        case,
        ENDPOINT,
        !borrowed,
        format!(
            "key {key:?}, {} then {}: {}, {}{}{words}",
            probe.shown_url,
            other.shown_url,
            status_of(&first),
            status_of(&second),
            if borrowed {
                " with the first endpoint's body"
            } else {
                ""
            }
        ),
    ))
}

fn header(name: &str, value: &str) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_bytes(name.as_bytes()).expect("a header name of idem's"),
        HeaderValue::from_str(value).expect("a header value of idem's"),
    )
}

pub(super) const TWO_KEYS: &str = "400, and no effect";

/// One request with two `Idempotency-Key` lines of different values: a
/// guard that reads one while something else reads the other can do the
/// work twice; the request must be refused.
pub(super) async fn two_key_headers(probe: &Probe, key_base: &str) -> Result<Check> {
    let second = header(KEY_HEADER, &quote_key(&format!("{key_base}-second-line")));
    let before = probe.count().await?;
    let shot = probe
        .once_with(Some(&format!("{key_base}-two-lines")), &[second], None)
        .await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    Ok(Check::judged(
        names::TWO_KEY_HEADERS,
        TWO_KEYS,
        shot.status == Some(400) && effects.unwrap_or(0) == 0,
        format!("two Idempotency-Key lines: {}{words}", status_of(&shot)),
    ))
}

pub(super) const MARKER: &str = "performed once: a success and exactly one effect";

/// A fresh key's request that carries `Idempotent-Replayed: true` itself:
/// a guard that trusts the client's header skips the work.
pub(super) async fn replay_marker(probe: &Probe, key_base: &str) -> Result<Check> {
    let case = names::REPLAY_MARKER;
    let marker = header("idempotent-replayed", "true");
    let before = probe.count().await?;
    let shot = probe
        .once_with(Some(&format!("{key_base}-marked")), &[marker], None)
        .await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let saw = format!(
        "a fresh key marked as a replay: {}{words}",
        status_of(&shot)
    );
    Ok(match effects {
        None => Check::not_applicable(
            case,
            MARKER,
            format!("{saw}; no count: give --count-sql or --count-cmd"),
        ),
        Some(n) => Check::judged(case, MARKER, shot.succeeded() && n == 1, saw),
    })
}

pub(super) const QUERY: &str =
    "never the first's response replayed: a 422, or an effect of its own";

/// The same key and body, first with another query string (a dry run),
/// then without: the second is another request, and must not be answered
/// with the first's stored response.
pub(super) async fn another_query(probe: &Probe, key_base: &str) -> Result<Check> {
    let case = names::ANOTHER_QUERY;
    let key = format!("{key_base}-query");
    let first = probe.once_with(Some(&key), &[], Some(OTHER_QUERY)).await;
    if !first.succeeded() {
        let saw = format!("?{OTHER_QUERY} got {}, not a success", status_of(&first));
        return Ok(Check::not_applicable(case, QUERY, saw));
    }
    let before = probe.count().await?;
    let second = probe.once_with(Some(&key), &[], None).await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let replayed = second.succeeded()
        && second.body == first.body
        && (second.replayed || effects.is_some_and(|e| e == 0));
    let own = second.status == Some(422) || effects.is_some_and(|e| e == 1);
    let saw = format!(
        "with ?{OTHER_QUERY} {}, without {}{}{words}",
        status_of(&first),
        status_of(&second),
        if replayed {
            ", the first's body replayed"
        } else {
            ""
        }
    );
    if !replayed && !own {
        // Neither a replay nor a proof of its own: without a count, a
        // success with another body cannot be told from a replay.
        return Ok(Check::not_applicable(
            case,
            QUERY,
            format!("{saw}; give a count to judge"),
        ));
    }
    Ok(Check::judged(case, QUERY, own && !replayed, saw))
}

pub(super) const PARALLEL: &str =
    "N requests with N keys at once are served together, not one after another";

/// N requests with N distinct keys sent at once: a guard that takes one
/// lock for every key serves them one at a time, the last answered after
/// about N times the latency of one alone, in a staircase: most of the
/// gaps between answers (three in four) as wide as half a request. A
/// machine busy elsewhere stretches a gap or two, not most of them: 34,
/// 54, 54, 54, 97 ms against 32 ms alone, seen in CI, is no staircase.
pub(super) async fn distinct_keys(probe: &Probe, key_base: &str, n: usize) -> Result<Check> {
    let case = names::DISTINCT_KEYS;
    let alone = probe
        .once(Some(&format!("{key_base}-alone")), &probe.body)
        .await;
    if !alone.succeeded() {
        let saw = format!("a request alone got {}, not a success", status_of(&alone));
        return Ok(Check::not_applicable(case, PARALLEL, saw));
    }
    let keys: Vec<String> = (0..n.max(2))
        .map(|i| format!("{key_base}-parallel-{i}"))
        .collect();
    let shots = probe.each_at_once(&keys).await;
    Ok(judge_parallel(&alone, &shots))
}

/// The verdict on `shots`, sent together, beside one request `alone`.
fn judge_parallel(alone: &Shot, shots: &[Shot]) -> Check {
    let case = names::DISTINCT_KEYS;
    let one = alone.latency_ms;
    let mut latencies: Vec<f64> = shots.iter().map(|s| s.latency_ms).collect();
    latencies.sort_by(f64::total_cmp);
    let n = latencies.len();
    let shown: Vec<String> = latencies.iter().map(|l| format!("{l:.0}")).collect();
    let saw = format!(
        "{n} keys at once answered after {} ms; one alone took {one:.0} ms",
        shown.join(", ")
    );
    if one < 2.0 {
        let saw = format!("{saw}: too quick to tell one at a time from together");
        return Check::not_applicable(case, PARALLEL, saw);
    }
    let slowest = latencies.last().copied().unwrap_or(0.0);
    let steps = latencies
        .windows(2)
        .filter(|w| w[1] - w[0] >= one / 2.0)
        .count();
    let serialized = slowest >= one * n as f64 / 2.0 && steps * 4 >= 3 * (n - 1);
    let all_answered = shots.iter().all(Shot::succeeded);
    Check::judged(
        case,
        PARALLEL,
        !serialized && all_answered,
        match serialized {
            true => format!("{saw}: one after another, in a staircase"),
            false => saw,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shot(ms: f64) -> Shot {
        Shot {
            request: 1,
            status: Some(201),
            latency_ms: ms,
            replayed: false,
            first_success: false,
            same_as_first_success: None,
            error: None,
            body: bytes::Bytes::new(),
            answered: None,
        }
    }

    #[test]
    fn a_staircase_is_one_at_a_time_and_a_flat_answer_is_not() {
        let alone = shot(20.0);
        let stairs: Vec<Shot> = [21.0, 42.0, 63.0, 84.0, 105.0].map(shot).to_vec();
        assert!(!judge_parallel(&alone, &stairs).passed());
        let flat: Vec<Shot> = [22.0, 23.0, 24.0, 23.0, 25.0].map(shot).to_vec();
        assert!(judge_parallel(&alone, &flat).passed());
        // Two stretched gaps on a busy machine (seen in CI) are no staircase.
        let busy: Vec<Shot> = [34.0, 54.0, 54.0, 54.0, 97.0].map(shot).to_vec();
        assert!(judge_parallel(&shot(32.0), &busy).passed());
        let busy: Vec<Shot> = [31.0, 31.0, 32.0, 67.0, 132.0].map(shot).to_vec();
        assert!(judge_parallel(&shot(31.0), &busy).passed());
        let quick = shot(0.5);
        assert_eq!(
            judge_parallel(&quick, &flat).mark,
            super::super::conformance::Mark::NotApplicable
        );
    }
}
