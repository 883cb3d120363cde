//! The exit-code contract, for a CI system to read, written once: each status, its code and what it means ([`Status::contract`] is the probe's `--help` and the docs' table). 0 every case held; 1 a case failed (or a guard failed, a scenario missed its figures); 2 a wrong command line; 3 nothing failed but something asked for could not be judged; 4 idem could not run at all.

use std::fmt;

/// How a run that did not hold ended, beyond its one-line message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// Every case held.
    Held = 0,
    /// The command line (or what it names) is wrong, as clap's own
    /// refusals are.
    BadInput = 2,
    /// A case failed: duplicate effects, or a conformance case that failed.
    Failed = 1,
    /// Nothing failed, but something asked for could not be judged.
    NotJudged = 3,
    /// The probe could not run: the service never answered, or the count
    /// could not be taken before the first request.
    CouldNotRun = 4,
}

/// An error that ends the run with its status's exit code.
#[derive(Debug, thiserror::Error)]
pub struct Ended {
    pub status: Status,
    pub message: String,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Status {
    /// Every status, in the order of their codes.
    pub const ALL: [Status; 5] = [
        Status::Held,
        Status::Failed,
        Status::BadInput,
        Status::NotJudged,
        Status::CouldNotRun,
    ];

    /// What the status means, as the probe's help says it.
    pub fn meaning(self) -> &'static str {
        match self {
            Status::Held => "every case held",
            Status::Failed => "a case failed (duplicate effects, or a conformance case)",
            Status::BadInput => "the command line (or the plan) is wrong",
            Status::NotJudged => {
                "nothing failed, but something asked for could not be judged (too few \
                 requests reached the server, every answer refused, no effect counted)"
            }
            Status::CouldNotRun => {
                "the probe could not run (the service never answered, or the count could not \
                 be taken before the first request), or a --report it asked for could not be \
                 written"
            }
        }
    }

    /// The whole contract in one paragraph: `Exit status: 0 ...; 1 ...`.
    pub fn contract() -> String {
        let each: Vec<String> = Status::ALL
            .iter()
            .map(|s| format!("{} {}", s.code(), s.meaning()))
            .collect();
        format!("Exit status: {}.", each.join("; "))
    }

    /// The process's exit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status `err` ends the run with, if it is one of these.
    pub fn of(err: &anyhow::Error) -> Option<Status> {
        err.downcast_ref::<Ended>().map(|e| e.status)
    }

    /// An error ending the run so, saying `message`.
    pub fn because(self, message: impl Into<String>) -> anyhow::Error {
        Ended {
            status: self,
            message: message.into(),
        }
        .into()
    }
}
