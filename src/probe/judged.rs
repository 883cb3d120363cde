//! What a probe judged, case by case: the one record its exit status, a plan's summary and the CI reports are made from.

use serde::Serialize;

use super::conformance::{Check, Mark};

/// How one case came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// One effect for the key, or the case's demand met.
    Held,
    /// Duplicate effects, or the case's demand not met.
    Failed,
    /// Asked for, but not measured: fewer requests reached the server than
    /// were sent, a count failed, nothing was in flight. A CI run must not
    /// pass on it.
    #[serde(rename = "not_judged")]
    Unjudged,
    /// Measured, but the answers alone cannot tell (no count was asked for
    /// and the statuses said nothing either way).
    Undecided,
    /// Not configured, so not run (no `--other-caller`, say).
    NotApplicable,
}

impl Judged {
    /// Every verdict, in the order a summary counts them.
    pub const ALL: [Judged; 5] = [
        Judged::Held,
        Judged::Failed,
        Judged::Unjudged,
        Judged::Undecided,
        Judged::NotApplicable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Judged::Held => "held",
            Judged::Failed => "failed",
            Judged::Unjudged => "not judged",
            Judged::Undecided => "undecided",
            Judged::NotApplicable => "n/a",
        }
    }
}

/// One case of one endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub case: String,
    pub judged: Judged,
    /// What it saw, in a few words: the figure behind the verdict.
    pub saw: String,
}

impl Case {
    pub fn new(case: impl Into<String>, judged: Judged, saw: impl Into<String>) -> Self {
        Case {
            case: case.into(),
            judged,
            saw: saw.into(),
        }
    }

    /// A conformance case; its n/a is a case that was not configured or
    /// whose own first request failed, never a verdict.
    pub fn of_check(check: &Check) -> Self {
        let judged = match check.mark {
            Mark::Pass => Judged::Held,
            Mark::Fail => Judged::Failed,
            Mark::NotApplicable => Judged::NotApplicable,
        };
        Case::new(check.case, judged, check.saw.clone())
    }
}

/// One endpoint's cases, or why it could not be probed at all.
#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub name: String,
    pub cases: Vec<Case>,
    /// Why nothing could be judged (the service never answered, the count
    /// could not be taken before the first request), if so.
    pub could_not_run: Option<String>,
}
