//! What the guard answers: a reply, why work failed, the verdict, and why a claim is out of reach.

use serde_json::Value;

/// A response: the status and body the client gets, and retries replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

/// Why the work did not produce a reply.
#[derive(Debug)]
pub enum WorkFailed {
    /// The work itself failed (a service errored): the guard rescues it as
    /// [`OnFailure`] says, with a 500 whose body carries this message.
    Service(String),
    /// The work failed, and this is the reply its client gets (and, with
    /// [`OnFailure::Store`], every retry): the caller's own status and body.
    Replied(Reply),
    /// The database failed under the work: nothing is kept, and the error is
    /// returned, to be retried with the same key if it is transient.
    Database(tokio_postgres::Error),
}

/// What the guard answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// This request did the work; its reply is stored for retries.
    Done(Reply),
    /// The key was completed before: the stored reply, byte for byte.
    Replay(Reply),
    /// Another request holds the claim (409): `why` says how it stands.
    InFlight {
        /// How this request found, or lost, the claim.
        why: ClaimState,
    },
    /// The key was first used with other parameters (422); no work was done.
    Reused,
    /// The work failed: the stored 500, or the claim released for a retry.
    Failed {
        /// The failure the client gets.
        reply: Reply,
        /// The claim was deleted ([`OnFailure::Release`]).
        released: bool,
    },
}

/// Why a request answers 409: the claim is someone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    /// Another request holds it, and is working.
    Pending,
    /// It was there, and was gone (released) by the time it was read again.
    Gone,
    /// It was stale, and another request took it over first.
    TakenByAnother,
    /// This request held it, and lost it to a takeover while it worked: its
    /// work was rolled back with the completion.
    TakenOver,
}

impl ClaimState {
    /// In a few words: `claim pending`, `claim taken over`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Pending => "claim pending",
            ClaimState::Gone => "claim gone",
            ClaimState::TakenByAnother => "stale claim taken by another",
            ClaimState::TakenOver => "claim taken over",
        }
    }
}
