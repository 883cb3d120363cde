//! The steps a request takes, named alike for every strategy so that their traces line up.

use serde::Serialize;

/// The steps a request can take. Every strategy uses these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Waiting for, then taking, a connection from the pool.
    Checkout,
    /// Opening the request's transaction (`--transaction request`).
    Begin,
    /// Locking the key before looking it up (advisory-lock).
    Lock,
    /// Looking the key up (check-then-store).
    Find,
    /// Inserting the key as a pending claim (claim-work-complete).
    Claim,
    /// Reading the claim that another request owns (a loser).
    Read,
    /// The work: the service call and the XP row.
    Work,
    /// Storing the key after the work (check-then-store).
    Store,
    /// Completing the claim with the response (claim-work-complete).
    Complete,
    /// A loser waiting between two reads of the claim (poll), connection given back.
    Wait,
    /// A fault on purpose: the connection was terminated here.
    Fault,
    /// Committing the request's transaction.
    Commit,
    /// Rolling the request's transaction back after an error.
    Rollback,
}

impl Step {
    /// Every step, in the order a request can take them.
    pub const ALL: [Step; 13] = [
        Step::Checkout,
        Step::Begin,
        Step::Lock,
        Step::Find,
        Step::Claim,
        Step::Read,
        Step::Work,
        Step::Store,
        Step::Complete,
        Step::Wait,
        Step::Commit,
        Step::Rollback,
        Step::Fault,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Checkout => "checkout",
            Step::Find => "find",
            Step::Claim => "claim",
            Step::Read => "read",
            Step::Work => "work",
            Step::Store => "store",
            Step::Complete => "complete",
            Step::Wait => "wait",
            Step::Fault => "fault",
            Step::Begin => "begin",
            Step::Lock => "lock",
            Step::Commit => "commit",
            Step::Rollback => "rollback",
        }
    }

    /// One letter for the timeline lanes.
    pub fn letter(self) -> char {
        match self {
            Step::Checkout => '·',
            Step::Find => 'f',
            Step::Claim => 'c',
            Step::Read => 'r',
            Step::Work => 'w',
            Step::Store => 's',
            Step::Complete => 'C',
            Step::Wait => '~',
            Step::Fault => '✗',
            Step::Begin => 'b',
            Step::Lock => 'l',
            Step::Commit => 'k',
            Step::Rollback => 'x',
        }
    }
}
