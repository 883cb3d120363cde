//! The probe's exit-code contract, for a CI system to read: 0 every case held, 1 a case failed, 2 a wrong command line, 3 something asked for could not be judged (and nothing failed), 4 idem could not run at all (or could not write a report it was asked for).

use std::fmt;

/// How a run that did not hold ended, beyond its one-line message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
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
