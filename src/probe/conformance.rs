//! The IETF draft's cases, one check each, on a fresh key each: missing key, another body, concurrent requests, a retry after completion.

use std::time::Duration;

use anyhow::{Result, bail};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::cases::names;
use super::profile::{Observed, Replay};
use super::{Caller, Probe, Shot, statuses};

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Pass,
    Fail,
    /// The check could not be judged (e.g. its first request failed).
    NotApplicable,
}

impl Mark {
    pub fn name(self) -> &'static str {
        match self {
            Mark::Pass => "PASS",
            Mark::Fail => "FAIL",
            Mark::NotApplicable => "n/a",
        }
    }
}

/// One case's verdict, the challenge's in-process cases and the draft's
/// checks over HTTP alike: one shape for people and for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub case: &'static str,
    /// What the case demands.
    pub demands: &'static str,
    pub mark: Mark,
    /// What it saw, in a few words.
    pub saw: String,
}

impl Check {
    /// A case that was judged: PASS or FAIL.
    pub fn judged(case: &'static str, demands: &'static str, passed: bool, saw: String) -> Self {
        let mark = if passed { Mark::Pass } else { Mark::Fail };
        Self {
            case,
            demands,
            mark,
            saw,
        }
    }

    /// A case that could not be judged here: n/a, saying why.
    pub fn not_applicable(case: &'static str, demands: &'static str, saw: String) -> Self {
        Self {
            case,
            demands,
            mark: Mark::NotApplicable,
            saw,
        }
    }

    /// Whether the case held.
    pub fn passed(&self) -> bool {
        self.mark == Mark::Pass
    }
}

/// A body that means another request: the first number in a JSON body
/// changed, or a field added to an object without numbers.
pub fn other_body(body: &Bytes) -> Result<Bytes> {
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        bail!(
            "--conformance needs a second body for its reuse case; the body is not JSON, so give --other-data"
        );
    };
    if !bump_first_number(&mut value) {
        match value.as_object_mut() {
            Some(object) => {
                object.insert("idem_probe_variant".into(), Value::from(1));
            }
            None => {
                bail!("--conformance needs a second body for its reuse case; give --other-data")
            }
        }
    }
    Ok(Bytes::from(value.to_string()))
}

fn bump_first_number(value: &mut Value) -> bool {
    match value {
        Value::Number(n) => {
            *value = match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Value::from(i.wrapping_add(1)),
                (None, Some(f)) => Value::from(f + 1.0),
                _ => return false,
            };
            true
        }
        Value::Array(items) => items.iter_mut().any(bump_first_number),
        Value::Object(fields) => fields.values_mut().any(bump_first_number),
        _ => false,
    }
}

/// `201, 409 ×4`
fn said(shots: &[Shot]) -> String {
    statuses(shots)
        .iter()
        .map(|(status, n)| match n {
            1 => status.clone(),
            n => format!("{status} ×{n}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn status_of(shot: &Shot) -> String {
    match (shot.status, &shot.error) {
        (Some(s), _) => s.to_string(),
        (None, Some(e)) => format!("no answer ({e})"),
        (None, None) => "no answer".into(),
    }
}

/// The effects between two counts, as words; empty when not counted. A
/// change that does not fit in 64 bits is an error, as in the probe.
pub(super) fn effects_words(
    before: Option<i64>,
    after: Option<i64>,
) -> Result<(Option<i64>, String)> {
    Ok(match before.zip(after) {
        Some((b, a)) => {
            let n = super::Effects::between(b, a)?.effects;
            (
                Some(n),
                format!("; {n} effect{}", if n == 1 { "" } else { "s" }),
            )
        }
        None => (None, String::new()),
    })
}

/// What the draft's cases demand, as their verdicts say.
pub(super) const MISSING_KEY_DEMANDS: &str = "400, and no effect";
pub(super) const OTHER_BODY_DEMANDS: &str = "422, and no new effect";
pub(super) const CONCURRENT_DEMANDS: &str = "one effect; the others 409 or the same response";
pub(super) const RETRIED_DEMANDS: &str = "the same status and body, and no new effect";
pub(super) const IN_FLIGHT_SAME_DEMANDS: &str =
    "409, or a wait and then the first's response; one effect";
pub(super) const IN_FLIGHT_OTHER_DEMANDS: &str = "409 or 422, never a second effect";

/// Case 1, no key at all: 400, and nothing done.
pub(super) async fn missing_key(probe: &Probe, seen: &mut Observed) -> Result<Check> {
    let body = &probe.body;
    let before = probe.count().await?;
    let shot = probe.once(None, body).await;
    seen.missing_key = shot.status;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    Ok(Check::judged(
        names::MISSING_KEY,
        MISSING_KEY_DEMANDS,
        shot.status == Some(400) && effects.unwrap_or(0) == 0,
        format!("{}{words}", status_of(&shot)),
    ))
}

/// Case 2, the same key with another body: 422, and no second effect.
pub(super) async fn reused_key(
    probe: &Probe,
    key_base: &str,
    other: &Bytes,
    seen: &mut Observed,
) -> Result<Check> {
    let body = &probe.body;
    let key = format!("{key_base}-reused");
    let first = probe.once(Some(&key), body).await;
    let before = probe.count().await?;
    let second = probe.once(Some(&key), other).await;
    if first.succeeded() {
        seen.other_body = second.status;
    }
    let (effects, words) = effects_words(before, probe.count().await?)?;
    Ok(if first.succeeded() {
        Check::judged(
            names::OTHER_BODY,
            OTHER_BODY_DEMANDS,
            second.status == Some(422) && effects.unwrap_or(0) == 0,
            format!(
                "first {}, then {}{words}",
                status_of(&first),
                status_of(&second)
            ),
        )
    } else {
        Check::not_applicable(
            names::OTHER_BODY,
            OTHER_BODY_DEMANDS,
            format!("the first request got {}, not a success", status_of(&first)),
        )
    })
}

/// Case 3, concurrent requests with one key: one effect; every other answer
/// is 409 or the same body as the success.
pub(super) async fn at_once(probe: &Probe, key_base: &str, concurrent: usize) -> Result<Check> {
    let body = &probe.body;
    let key = format!("{key_base}-concurrent");
    let before = probe.count().await?;
    let volley = probe.volley(Some(&key), body, concurrent).await;
    let shots = volley.shots;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    if let Some(why) = super::not_raced(&shots, &volley.release)
        && effects.is_none_or(|e| e <= 1)
    {
        return Ok(Check::not_applicable(
            names::CONCURRENT,
            CONCURRENT_DEMANDS,
            format!("{}; {why}", said(&shots)),
        ));
    }
    let consistent = shots.iter().filter(|s| s.succeeded()).count() >= 1
        && shots.iter().all(|s| {
            s.status == Some(409) || (s.succeeded() && s.same_as_first_success == Some(true))
        });
    Ok(Check::judged(
        names::CONCURRENT,
        CONCURRENT_DEMANDS,
        consistent && effects.is_none_or(|e| e == 1),
        format!(
            "{}; {} distinct bod{}{words}",
            said(&shots),
            super::distinct_bodies(&shots),
            if super::distinct_bodies(&shots) == 1 {
                "y"
            } else {
                "ies"
            }
        ),
    ))
}

/// Case 4, a retry after completion: the same status and body, byte for byte.
pub(super) async fn retried(probe: &Probe, key_base: &str, seen: &mut Observed) -> Result<Check> {
    let body = &probe.body;
    let key = format!("{key_base}-retried");
    let first = probe.once(Some(&key), body).await;
    let before = probe.count().await?;
    let retry = probe.once(Some(&key), body).await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let same = first.status.is_some() && first.status == retry.status && first.body == retry.body;
    if first.succeeded() && retry.status.is_some() {
        seen.replay = Some(Replay {
            same,
            marked: retry.replayed,
        });
    }
    Ok(Check::judged(
        names::RETRIED,
        RETRIED_DEMANDS,
        same && effects.unwrap_or(0) == 0,
        format!(
            "first {}, retry {}{}{words}",
            status_of(&first),
            status_of(&retry),
            match (same, first.status.is_some()) {
                (true, _) => ", same body",
                (false, true) if first.status == retry.status => ", another body",
                _ => "",
            }
        ),
    ))
}

/// When the in-flight cases send their second request: `--in-flight-ms`,
/// or half the latency of a request of the probe's own on a key of its own,
/// timed first.
pub async fn in_flight_delay(
    probe: &Probe,
    key_base: &str,
    given: Option<Duration>,
) -> (Duration, String) {
    if let Some(given) = given {
        return (
            given,
            format!(
                "{} ms after the first send (--in-flight-ms)",
                given.as_millis()
            ),
        );
    }
    let timed = probe
        .once(Some(&format!("{key_base}-timed")), &probe.body)
        .await;
    let latency = Duration::from_secs_f64(timed.latency_ms.max(0.0) / 1000.0);
    let delay = latency / 2;
    (
        delay,
        format!(
            "{} ms after the first send (half the {:.0} ms a request took when timed first)",
            delay.as_millis(),
            timed.latency_ms
        ),
    )
}

/// The in-flight cases: the same key again while the first request is
/// being answered, with the same body and with another, each on a key of
/// its own. The same body gets 409 or, after a wait, the first's response;
/// another body 409 or 422; either way one effect.
pub async fn in_flight(
    probe: &Probe,
    key_base: &str,
    other: &Bytes,
    (delay, when): &(Duration, String),
    seen: &mut Observed,
) -> Result<Vec<Check>> {
    let same = Overlap::send(probe, &format!("{key_base}-in-flight"), &probe.body, *delay).await?;
    let same_body = same.second.succeeded()
        && same.second.status == same.first.status
        && same.second.body == same.first.body;
    if same.overlapped() {
        seen.in_flight = same.second.status;
        seen.in_flight_waited = same_body;
    }
    let same_held = same.second.status == Some(409) || same_body;
    let changed =
        Overlap::send(probe, &format!("{key_base}-in-flight-other"), other, *delay).await?;
    let changed_held = matches!(changed.second.status, Some(409 | 422));
    Ok(vec![
        same.judged(
            names::IN_FLIGHT_SAME,
            IN_FLIGHT_SAME_DEMANDS,
            same_held,
            if same_body {
                " with the first's body"
            } else {
                ""
            },
            when,
        ),
        changed.judged(
            names::IN_FLIGHT_OTHER,
            IN_FLIGHT_OTHER_DEMANDS,
            changed_held,
            "",
            when,
        ),
    ])
}

/// Two requests with one key, the second sent while the first is in
/// flight, and the effects they made together.
struct Overlap {
    first: Shot,
    second: Shot,
    /// When the second request left.
    second_sent: std::time::Instant,
    effects: Option<i64>,
    words: String,
}

impl Overlap {
    /// Sends the probe's body with `key`, and `second` with the same key
    /// `delay` later.
    async fn send(probe: &Probe, key: &str, second: &Bytes, delay: Duration) -> Result<Self> {
        let before = probe.count().await?;
        let (first, (second_sent, second)) =
            tokio::join!(probe.once(Some(key), &probe.body), async {
                tokio::time::sleep(delay).await;
                (
                    std::time::Instant::now(),
                    probe.once(Some(key), second).await,
                )
            });
        let (effects, words) = effects_words(before, probe.count().await?)?;
        Ok(Self {
            first,
            second,
            second_sent,
            effects,
            words,
        })
    }

    /// Whether the second request left while the first, a success, was
    /// still being answered.
    fn overlapped(&self) -> bool {
        self.first.succeeded() && self.first.answered.is_some_and(|at| at > self.second_sent)
    }

    /// The case's verdict: n/a when the first request did not succeed, or
    /// was answered before the second left (then nothing was in flight),
    /// else `held` and one effect (when counted).
    fn judged(
        self,
        case: &'static str,
        demands: &'static str,
        held: bool,
        detail: &str,
        when: &str,
    ) -> Check {
        let saw = format!(
            "second sent {when}: first {}, second {}{detail}{}",
            status_of(&self.first),
            status_of(&self.second),
            self.words
        );
        if self.first.succeeded() && !self.overlapped() {
            return Check::not_applicable(
                case,
                demands,
                format!(
                    "the first was answered ({}) before the second left, {when}: nothing was in \
                     flight (give --in-flight-ms)",
                    status_of(&self.first)
                ),
            );
        }
        if !self.first.succeeded() {
            return Check::not_applicable(case, demands, saw);
        }
        Check::judged(
            case,
            demands,
            held && self.effects.is_none_or(|e| e == 1),
            saw,
        )
    }
}

/// What the "after an abort" case demands.
pub(super) const AFTER_AN_ABORT: &str =
    "retries end in the first's response or a fresh success; one effect";

/// The case of a client that times out: the request is sent and its
/// connection closed while it is being answered (when the in-flight cases
/// send their second request), then the same key is retried (every 200 ms
/// while it gets 409) until a final answer or `settle` has passed. A claim
/// left pending for good answers 409 to every retry: the key is stuck.
pub async fn after_an_abort(
    probe: &Probe,
    key_base: &str,
    (linger, when): &(Duration, String),
    settle: Duration,
) -> Result<Check> {
    let case = names::AFTER_AN_ABORT;
    let body = &probe.body;
    let key = format!("{key_base}-abort");
    let before = probe.count().await?;
    let not_applicable = |saw: String| Check::not_applicable(case, AFTER_AN_ABORT, saw);
    match probe.hang_up(Some(&key), body, *linger).await {
        Err(err) => {
            let saw = format!("the request could not be sent and abandoned: {err:#}");
            return Ok(not_applicable(saw));
        }
        Ok(true) => {
            let saw = format!(
                "the server answered before the client hung up, {when}: no abort (give --in-flight-ms)"
            );
            return Ok(not_applicable(saw));
        }
        Ok(false) => {}
    }
    let deadline = tokio::time::Instant::now() + settle;
    let mut tries = 0;
    let last = loop {
        tries += 1;
        let shot = probe.once(Some(&key), body).await;
        if shot.status != Some(409) || tokio::time::Instant::now() >= deadline {
            break shot;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let tried = match tries {
        1 => "the retry".to_owned(),
        n => format!("{n} retries, the last"),
    };
    let stuck = last.status == Some(409);
    let saw = match stuck {
        true => format!(
            "still 409 after {} s: the key is stuck ({tries} retries){words}",
            settle.as_secs_f64()
        ),
        false => format!("abandoned {when}, then {tried} {}{words}", status_of(&last)),
    };
    Ok(Check::judged(
        case,
        AFTER_AN_ABORT,
        last.succeeded() && effects.is_none_or(|e| e == 1),
        saw,
    ))
}

/// What the "another caller" case demands.
pub(super) const ANOTHER_CALLER: &str = "never the first caller's response";

/// The case of a key sent by another caller: after the first caller's
/// request completed, a second identity (`--other-caller`) sends the same
/// key and body. A key not scoped by its caller answers it with the first
/// caller's stored response: a leak, not only a duplicate. A fresh answer
/// of its own, or a refusal, holds.
pub async fn another_caller(probe: &Probe, key_base: &str, caller: &Caller) -> Result<Check> {
    let case = names::ANOTHER_CALLER;
    let body = &probe.body;
    let key = format!("{key_base}-other-caller");
    let first = probe.once(Some(&key), body).await;
    if !first.succeeded() {
        return Ok(Check::not_applicable(
            case,
            ANOTHER_CALLER,
            format!("the first caller got {}, not a success", status_of(&first)),
        ));
    }
    let before = probe.count().await?;
    let other = probe.once_as(caller, Some(&key), body).await;
    let (effects, words) = effects_words(before, probe.count().await?)?;
    let leaked = other.status == first.status
        && other.body == first.body
        && (other.replayed || effects.is_none_or(|e| e == 0));
    let answer = match (leaked, other.succeeded()) {
        (true, _) => " with the first caller's body (a leak)",
        (false, true) => " with a body of its own",
        (false, false) => "",
    };
    Ok(Check::judged(
        case,
        ANOTHER_CALLER,
        !leaked,
        format!(
            "first caller {}, other caller {}{answer}{words}",
            status_of(&first),
            status_of(&other)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_body_changes_the_first_number() {
        let other = other_body(&Bytes::from(r#"{"user_id": 42, "amount": 10}"#)).unwrap();
        let value: Value = serde_json::from_slice(&other).unwrap();
        // serde_json orders keys: "amount" comes first.
        assert_eq!(value["amount"], 11);
        assert_eq!(value["user_id"], 42);
        let other = other_body(&Bytes::from(r#"{"name": "x"}"#)).unwrap();
        assert!(String::from_utf8_lossy(&other).contains("idem_probe_variant"));
        assert!(other_body(&Bytes::from("plain text")).is_err());
    }
}
