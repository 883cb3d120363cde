//! A schedule's moves: a worker's next step, the clock jumping past the stale-claim age, or a worker's crash.
//!
//! `idem step --schedule 1,1,clock,2,crash1` reads as: worker 1 takes two
//! steps, every pending claim grows older than the stale-claim age at
//! once (the clock is moved, nobody sleeps), worker 2 takes a step, and
//! worker 1's server process is killed before its next one, as a crashed
//! app server's would be. The explorer branches on the same moves.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits;

/// One entry of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Move {
    /// This worker takes its next step.
    Step(usize),
    /// Every pending claim whose owner is not kept alive by a heartbeat
    /// grows older than the stale-claim age.
    Clock,
    /// This worker's connection is killed before its next step; the
    /// worker is gone, as a crashed app server is (lesson 7).
    Crash(usize),
}

/// What the clock move is called in a schedule.
const CLOCK: &str = "clock";
/// What a crash move starts with in a schedule: `crash2`.
const CRASH: &str = "crash";

impl Move {
    /// The worker a move concerns, if any.
    pub fn worker(self) -> Option<usize> {
        match self {
            Move::Step(w) | Move::Crash(w) => Some(w),
            Move::Clock => None,
        }
    }

    /// Whether it is a plain step, not a fault or the clock.
    pub fn is_step(self) -> bool {
        matches!(self, Move::Step(_))
    }

    /// Reads `2`, `clock` or `crash2`, a worker within `--schedule`'s bounds.
    pub fn parse(text: &str) -> Result<Move, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case(CLOCK) {
            return Ok(Move::Clock);
        }
        let worker = |n: &str| limits::SCHEDULE_WORKER.parse(n).map(|w| w as usize);
        match text.strip_prefix(CRASH) {
            Some(n) => worker(n).map(Move::Crash),
            None if text.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                worker(text).map(Move::Step)
            }
            None => Err(format!(
                "`{}` is not a move: give a worker number (1), `clock` or a crash (crash1)",
                crate::controls::escaped(text)
            )),
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Move::Step(w) => write!(f, "{w}"),
            Move::Clock => f.write_str(CLOCK),
            Move::Crash(w) => write!(f, "{CRASH}{w}"),
        }
    }
}

/// A step is a number in JSON and in a scenario file; the clock and a
/// crash are words.
impl Serialize for Move {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Move::Step(w) => s.serialize_u64(*w as u64),
            other => s.collect_str(other),
        }
    }
}

impl<'de> Deserialize<'de> for Move {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Word(String),
        }
        let text = match Written::deserialize(d)? {
            Written::Number(n) => n.to_string(),
            Written::Word(w) => w,
        };
        Move::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A schedule as `--schedule` takes it: `1,1,clock,2`.
pub fn joined(schedule: &[Move]) -> String {
    schedule
        .iter()
        .map(Move::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The plain schedule of these worker numbers.
#[cfg(test)]
pub fn steps(workers: &[usize]) -> Vec<Move> {
    workers.iter().map(|&w| Move::Step(w)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_read_back_as_they_are_written() {
        for text in ["1", "5", "clock", "crash2"] {
            assert_eq!(Move::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Move::parse("CLOCK"), Ok(Move::Clock));
    }

    #[test]
    fn a_move_out_of_bounds_or_unknown_is_refused() {
        // Whether the race has worker 6 (or 0) is its settings' to say,
        // against its --workers: the move itself reads.
        assert_eq!(Move::parse("6"), Ok(Move::Step(6)));
        assert!(Move::parse("-1").is_err());
        assert!(Move::parse("crash-2").is_err());
        assert!(Move::parse("tick").unwrap_err().contains("not a move"));
    }
}
