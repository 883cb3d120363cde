//! How a request ended, as the client sees it: an outcome, a status, a body, and what waiting cost.

use serde::Serialize;
use serde_json::Value;

/// A request's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It did the work, and its XP row is the one the key stands for (201).
    Created,
    /// It found a finished result and answered with it: the stored 201.
    Replayed,
    /// Another request held the key and was still working (409 Conflict).
    Conflict,
    /// The key was first used with other parameters (422 Unprocessable Content).
    Mismatch,
    /// It made an XP row although another request also made one: the
    /// duplicate work the course is about. The client still got 201.
    Duplicate,
    /// The work failed and the client got 500, now or replayed.
    Failed,
    /// The worker crashed on purpose (a fault) and answered nothing.
    Crashed,
    /// The client hung up mid-request on purpose (`--hang-up`) and read
    /// no answer.
    HungUp,
    /// No connection came free before the checkout timeout (503).
    CheckoutTimeout,
    /// The database answered with an error (500).
    Error,
}

impl Outcome {
    /// The outcome a name stands for, as `name` spells it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    pub const ALL: [Outcome; 10] = [
        Outcome::Created,
        Outcome::Replayed,
        Outcome::Conflict,
        Outcome::Mismatch,
        Outcome::Duplicate,
        Outcome::Failed,
        Outcome::Crashed,
        Outcome::HungUp,
        Outcome::CheckoutTimeout,
        Outcome::Error,
    ];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Replayed => "replayed",
            Outcome::Conflict => "conflict",
            Outcome::Mismatch => "mismatch",
            Outcome::Duplicate => "duplicate",
            Outcome::Failed => "failed",
            Outcome::Crashed => "crashed",
            Outcome::HungUp => "hung_up",
            Outcome::CheckoutTimeout => "checkout_timeout",
            Outcome::Error => "error",
        }
    }

    /// The HTTP status the client would have received.
    pub fn status(self) -> u16 {
        match self {
            Outcome::Created | Outcome::Duplicate => 201,
            // A replay repeats the stored response, status included: every
            // strategy stores its 201 (a stored failure replays as Failed).
            Outcome::Replayed => 201,
            Outcome::Conflict => 409,
            Outcome::Mismatch => 422,
            Outcome::Failed => 500,
            // No answer at all.
            Outcome::Crashed | Outcome::HungUp => 0,
            Outcome::CheckoutTimeout => 503,
            Outcome::Error => 500,
        }
    }
}

/// What a strategy answers for one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub outcome: Outcome,
    /// The answer repeats a stored response, byte for byte (a replayed
    /// success, or a replayed stored failure): what the app marks with
    /// `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// What the request found when it looked (e.g. "no key", "claim pending").
    pub saw: String,
    /// What it did about it (e.g. "made XP #2, stored key").
    pub did: String,
    /// The XP row this request itself made, if any.
    pub made_xp: Option<i64>,
    /// The response body the client received.
    pub body: Option<Value>,
    /// What waiting for another request cost, for a loser that waited.
    pub waited: Option<Waited>,
}

/// What waiting for the winner cost one loser.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Waited {
    /// From the first sign of the winner to the answer, in ms.
    pub ms: f64,
    /// Reads of the claim while waiting (poll).
    pub reads: u32,
    /// Whether a pooled connection was held all that time (block).
    pub held_connection: bool,
}
