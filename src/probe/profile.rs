//! The API's answers point by point beside two documented behaviours, the IETF draft's and Stripe's: only what the conformance cases observed.
//!
//! The conformance cases judge (PASS or FAIL); the profile does not. Two
//! APIs that both hold can answer differently (Stripe answers another body
//! with 400, the draft asks 422), and a learner comparing an API with the
//! documents it claims to follow wants to see where it matches which.

use serde::Serialize;

/// The newest revision of the IETF draft read for these points, and where
/// they are written.
pub const DRAFT: &str =
    "IETF draft-ietf-httpapi-idempotency-key-header-06 (February 2025), section 2.7";

/// Stripe's published behaviour.
pub const STRIPE: &str = "Stripe API reference, Idempotent requests \
     (https://docs.stripe.com/api/idempotent_requests)";

/// What the conformance cases saw of each point; `None` where a case did
/// not see it (it was n/a, or no answer came).
#[derive(Debug, Clone, Copy, Default)]
pub struct Observed {
    /// The status of a request without a key.
    pub(crate) missing_key: Option<u16>,
    /// The status of the same key with another body, after the first
    /// completed.
    pub(crate) other_body: Option<u16>,
    /// The status of the same request while the first was in flight.
    pub(crate) in_flight: Option<u16>,
    /// Whether that answer was the first's own, after a wait.
    pub(crate) in_flight_waited: bool,
    /// A retry after completion: whether it had the first's status and
    /// body, and whether it was marked as a replay.
    pub(crate) replay: Option<Replay>,
    /// After a request whose effect failed (the sink answered 500): `true`
    /// when its retry got the stored failure back, `false` when it was
    /// performed again. Seen only with `--sink`.
    pub(crate) failure_replayed: Option<bool>,
}

impl Observed {
    /// Takes what `other` saw of a point this has not seen: each case sees
    /// its own points, and the profile is all of them.
    pub fn merge(&mut self, other: Observed) {
        self.missing_key = self.missing_key.or(other.missing_key);
        self.other_body = self.other_body.or(other.other_body);
        if self.in_flight.is_none() {
            self.in_flight = other.in_flight;
            self.in_flight_waited = other.in_flight_waited;
        }
        self.replay = self.replay.or(other.replay);
        self.failure_replayed = self.failure_replayed.or(other.failure_replayed);
    }
}

/// What a retry after completion came back with.
#[derive(Debug, Clone, Copy)]
pub struct Replay {
    /// The first's status and body, byte for byte.
    pub same: bool,
    /// `Idempotent-Replayed: true`.
    pub marked: bool,
}

/// How an observation stands against a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Agrees {
    Matches,
    Differs,
    /// The document says nothing of this point.
    Silent,
    /// Not observed.
    Unknown,
}

impl Agrees {
    fn of(seen: Option<bool>) -> Self {
        match seen {
            Some(true) => Agrees::Matches,
            Some(false) => Agrees::Differs,
            None => Agrees::Unknown,
        }
    }
}

/// One point of the profile.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub point: &'static str,
    /// What the API answered, in a few words, or `unknown`.
    pub observed: String,
    /// What the draft asks.
    pub draft_says: &'static str,
    pub draft: Agrees,
    /// What Stripe documents.
    pub stripe_says: &'static str,
    pub stripe: Agrees,
}

/// The profile: one `--json` line, and a table under the conformance's.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub profile: Vec<Point>,
    /// Where the draft's points are written.
    pub draft: &'static str,
    /// Where Stripe's are.
    pub stripe: &'static str,
}

impl Profile {
    /// The points, from what was observed.
    pub fn of(seen: &Observed) -> Self {
        let status = |s: Option<u16>| s.map_or_else(|| "unknown".to_string(), |s| s.to_string());
        let is = |s: Option<u16>, want: fn(u16) -> bool| s.map(want);
        let replay = seen.replay;
        let points = vec![
            Point {
                point: "no key",
                observed: status(seen.missing_key),
                draft_says: "400 (where a key is required)",
                draft: Agrees::of(is(seen.missing_key, |s| s == 400)),
                stripe_says: "performed: keys are optional",
                stripe: Agrees::of(is(seen.missing_key, |s| (200..300).contains(&s))),
            },
            Point {
                point: "same key, other body",
                observed: status(seen.other_body),
                draft_says: "422",
                draft: Agrees::of(is(seen.other_body, |s| s == 422)),
                stripe_says: "400 idempotency_error",
                stripe: Agrees::of(is(seen.other_body, |s| s == 400)),
            },
            Point {
                point: "in flight",
                observed: match (seen.in_flight, seen.in_flight_waited) {
                    (Some(s), true) => format!("{s}, the first's response after a wait"),
                    (s, _) => status(s),
                },
                draft_says: "409",
                draft: Agrees::of(is(seen.in_flight, |s| s == 409)),
                stripe_says: "409 idempotency_key_in_use",
                stripe: Agrees::of(is(seen.in_flight, |s| s == 409)),
            },
            Point {
                point: "replay",
                observed: match replay {
                    Some(r) if r.same => "the first's status and body".into(),
                    Some(_) => "another status or body".into(),
                    None => "unknown".into(),
                },
                draft_says: "the first result",
                draft: Agrees::of(replay.map(|r| r.same)),
                stripe_says: "the first status and body",
                stripe: Agrees::of(replay.map(|r| r.same)),
            },
            Point {
                point: "replay marked",
                observed: match replay {
                    Some(r) if r.marked => "Idempotent-Replayed: true".into(),
                    Some(_) => "no marker".into(),
                    None => "unknown".into(),
                },
                draft_says: "nothing",
                draft: Agrees::Silent,
                stripe_says: "Idempotent-Replayed: true",
                stripe: Agrees::of(replay.map(|r| r.marked)),
            },
            Point {
                point: "after a failed effect",
                observed: match seen.failure_replayed {
                    Some(true) => "the stored failure replayed".into(),
                    Some(false) => "performed again on retry".into(),
                    None => "unknown (needs --sink)".into(),
                },
                draft_says: "nothing",
                draft: Agrees::Silent,
                stripe_says: "the stored result, a 500 too",
                stripe: Agrees::of(seen.failure_replayed),
            },
        ];
        Self {
            profile: points,
            draft: DRAFT,
            stripe: STRIPE,
        }
    }

    /// How many points match `which` of the two, of those observed.
    pub fn matching(&self, which: fn(&Point) -> Agrees) -> (usize, usize) {
        let judged = self
            .profile
            .iter()
            .filter(|p| !matches!(which(p), Agrees::Unknown | Agrees::Silent));
        let matching = judged.clone().filter(|p| which(p) == Agrees::Matches);
        (matching.count(), judged.count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_answers_match_stripe_and_differ_from_the_draft_where_they_do() {
        let stripe_like = Observed {
            missing_key: Some(200),
            other_body: Some(400),
            in_flight: Some(409),
            in_flight_waited: false,
            replay: Some(Replay {
                same: true,
                marked: true,
            }),
            failure_replayed: Some(true),
        };
        let profile = Profile::of(&stripe_like);
        assert_eq!(profile.matching(|p| p.stripe), (6, 6));
        assert_eq!(profile.matching(|p| p.draft), (2, 4));
        let unseen = Profile::of(&Observed::default());
        assert!(unseen.profile.iter().all(|p| p.stripe == Agrees::Unknown));
        assert_eq!(unseen.matching(|p| p.draft), (0, 0));
    }
}
