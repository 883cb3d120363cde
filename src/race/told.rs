//! A sentence about a race, made of the race's own figures.
//!
//! Every number and every worker a narrative names goes in as a [`Fact`]:
//! a value with what it claims about the race ("2 requests did the work",
//! "worker 3 took a stale claim over"). The narrative's code computes the
//! value; [`Told::finish`] then reads each claim off the race a second
//! time, by the fact's own definition here, before the sentence is shown.
//! A sentence that says four where the table says three is caught there:
//! a debug build (every test run) stops with the disagreement, and a
//! release build leaves the sentence out and says why rather than show it.

use std::fmt;

use crate::race::{Outcome, RaceResult, WorkerReport};
use crate::request::Step;

/// What a fact says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Its work step ran (it called the award service), whatever followed.
    DidWork,
    /// It is a client's retry, not one of the burst.
    Retry,
    /// It took a stale claim over from another request.
    TookOver,
    /// It did no work, and answered 409 or replayed: it lost the claim.
    LostClaim,
    /// It waited for the winner holding a pooled connection.
    BlockedHolding,
    /// One of the burst (not a retry) whose work step ran.
    FirstTryWorked,
    /// One of the burst (not a retry) that replayed.
    FirstTryReplayed,
    /// It was given another request's stored answer.
    GotAnotherAnswer,
    /// It ended with this outcome.
    Ended(Outcome),
    /// Its work ran, but the store of record had seen a newer fencing
    /// token and wrote none of its rows (`--redis-fence`).
    FencedOut,
    /// A Redis claim's owner whose `WAIT` heard no replica, and which let
    /// its claim go without working.
    Unreplicated,
}

impl Who {
    /// Whether `w` is so, read off its report.
    pub fn is(self, w: &WorkerReport) -> bool {
        match self {
            Who::DidWork => w.took(Step::Work),
            Who::Retry => w.retry,
            Who::TookOver => w
                .steps
                .iter()
                .any(|e| e.note.contains("took over a stale claim")),
            Who::Ended(o) => w.outcome == o,
            Who::LostClaim => {
                !Who::DidWork.is(w) && matches!(w.outcome, Outcome::Conflict | Outcome::Replayed)
            }
            Who::BlockedHolding => w.waited.is_some_and(|w| w.held_connection),
            Who::FirstTryWorked => !w.retry && Who::DidWork.is(w),
            Who::FirstTryReplayed => !w.retry && w.outcome == Outcome::Replayed,
            Who::GotAnotherAnswer => w.wrong_replay.is_some(),
            // Read off the answer, not the steps: a request whose client
            // hung up keeps its answer's words but not its steps.
            Who::Unreplicated => {
                use crate::strategy::claim_in_redis::NOT_REPLICATED;
                w.saw == NOT_REPLICATED
            }
            Who::FencedOut => {
                use crate::strategy::claim_in_redis::{FENCED_OUT, WORKED_FOR_NOTHING};
                w.saw == FENCED_OUT && w.did.ends_with(WORKED_FOR_NOTHING)
            }
        }
    }
}

/// A setting of the race a sentence repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The pool's size.
    Pool,
    /// The pool's connections left for the workers (the runner may hold one).
    PoolForWorkers,
    /// App processes in front of the database.
    Replicas,
    /// Other cache writes after the race.
    CachePressure,
    /// The work's length, in milliseconds.
    WorkMs,
    /// A Redis claim's time to live, in milliseconds.
    RedisTtlMs,
    /// How often a Redis claim's owner renews it, in milliseconds.
    RedisHeartbeatMs,
    /// How long a Redis claim's owner waits for the replica (`WAIT`).
    RedisWaitMs,
}

impl Setting {
    fn of(self, r: &RaceResult) -> u64 {
        match self {
            Setting::Pool => r.pool_size as u64,
            Setting::PoolForWorkers => {
                (r.pool_size - usize::from(r.runner_holds_connection)) as u64
            }
            Setting::Replicas => r.replicas as u64,
            Setting::CachePressure => r.cache_pressure,
            Setting::WorkMs => r.work_ms,
            Setting::RedisTtlMs => r.redis.map_or(0, |redis| redis.plan.ttl_ms),
            Setting::RedisHeartbeatMs => r
                .redis
                .and_then(|redis| redis.plan.heartbeat_ms)
                .unwrap_or(0),
            Setting::RedisWaitMs => r.redis.and_then(|redis| redis.plan.wait_ms).unwrap_or(0),
        }
    }
}

/// A figure a Redis race measured: what the cache traffic did, and what
/// `WAIT` heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InRedis {
    /// Other keys written.
    Written,
    /// Writes refused for want of memory.
    Refused,
    /// Keys Redis evicted.
    Evicted,
    /// Replicas that acknowledged the first claim (`WAIT`).
    Acknowledged,
}

impl InRedis {
    fn of(self, r: &RaceResult) -> u64 {
        let Some(redis) = r.redis else {
            return 0;
        };
        let pressed = redis.pressed.unwrap_or_default();
        match self {
            InRedis::Written => pressed.written,
            InRedis::Refused => pressed.refused,
            InRedis::Evicted => pressed.evicted,
            InRedis::Acknowledged => redis.acknowledged.unwrap_or(0),
        }
    }
}

/// One figure a sentence states, with the value it states.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fact {
    XpRows(u64),
    KeyRows(u64),
    /// Of the key rows, the claims left pending.
    PendingKeyRows(u64),
    ServiceCalls(u64),
    /// This many requests ended with this outcome.
    Answered(Outcome, u64),
    /// This many requests are so.
    Requests(usize, Who),
    /// This worker (its number in the table) is so.
    Worker(usize, Who),
    Setting(Setting, u64),
    /// What a Redis race measured there: the cache traffic
    /// (`--redis-pressure`), the replica's acknowledgement (`WAIT`).
    InRedis(InRedis, u64),
    /// A part of a total that the same sentence states as a fact of its
    /// own (the replays that waited, of all the replays): shown, and
    /// checked through its total.
    Share(u64),
}

impl Fact {
    /// The value shown in the sentence.
    pub fn value(self) -> u64 {
        match self {
            Fact::XpRows(n)
            | Fact::KeyRows(n)
            | Fact::PendingKeyRows(n)
            | Fact::ServiceCalls(n)
            | Fact::Answered(_, n)
            | Fact::Setting(_, n)
            | Fact::InRedis(_, n)
            | Fact::Share(n) => n,
            Fact::Requests(n, _) | Fact::Worker(n, _) => n as u64,
        }
    }

    /// `None` when the race bears the fact out; otherwise what it shows.
    fn against(self, r: &RaceResult) -> Option<String> {
        let found = match self {
            Fact::XpRows(_) => r.xp_rows,
            Fact::KeyRows(_) => r.key_rows,
            Fact::PendingKeyRows(_) => r.pending_key_rows,
            Fact::ServiceCalls(_) => r.service_calls,
            Fact::Answered(o, _) => r.count(o),
            Fact::Requests(_, who) => r.reports.iter().filter(|w| who.is(w)).count() as u64,
            Fact::Worker(n, who) => {
                return match r.reports.iter().find(|w| w.worker == n && who.is(w)) {
                    Some(_) => None,
                    None => Some(format!("no worker {n} is {who:?}")),
                };
            }
            Fact::Setting(s, _) => s.of(r),
            Fact::InRedis(p, _) => p.of(r),
            Fact::Share(n) => n,
        };
        (found != self.value()).then(|| format!("the race shows {found}"))
    }

    /// The same against a race on another engine (MariaDB), whose
    /// figures are its rows, its calls and its requests' outcomes; a fact
    /// of anything else cannot be borne out there.
    fn against_engine(self, r: &crate::race::mariadb::EngineResult) -> Option<String> {
        let found = match self {
            Fact::XpRows(_) => r.xp_rows,
            Fact::KeyRows(_) => r.key_rows,
            Fact::PendingKeyRows(_) => r.pending_key_rows,
            Fact::ServiceCalls(_) => r.service_calls,
            Fact::Answered(o, _) => r.reports.iter().filter(|w| w.outcome == o).count() as u64,
            Fact::Share(n) => n,
            Fact::Worker(n, Who::Ended(o)) => {
                let ended = r.reports.iter().any(|w| w.worker == n && w.outcome == o);
                return (!ended).then(|| format!("no worker {n} ended {o:?}"));
            }
            other => return Some(format!("{other:?} is not a figure of a race on MariaDB")),
        };
        (found != self.value()).then(|| format!("the race shows {found}"))
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value())
    }
}

/// A fact shown with its noun: `1 worker`, `3 workers`, `2 retries`.
#[derive(Debug, Clone, Copy)]
pub struct Counted(pub Fact, pub &'static str);

impl fmt::Display for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&counted(self.0.value(), self.1))
    }
}

/// `1 worker`, `3 workers`; `1 retry`, `2 retries`.
pub fn counted(n: u64, what: &str) -> String {
    let consonant_y = what
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']));
    match (n, consonant_y) {
        (1, _) => format!("1 {what}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {what}s"),
    }
}

/// What may fill a narrative's `{}`: a fact (kept, to be checked), a
/// counted fact, or text with no figure of the race in it (a step's name,
/// a duration measured on the clock).
pub trait Stated {
    fn state(self, told: &mut Told) -> String;
}

impl Stated for Fact {
    fn state(self, told: &mut Told) -> String {
        told.facts.push(self);
        self.to_string()
    }
}

impl Stated for Counted {
    fn state(self, told: &mut Told) -> String {
        told.facts.push(self.0);
        self.to_string()
    }
}

impl Stated for &str {
    fn state(self, _: &mut Told) -> String {
        self.to_string()
    }
}

impl Stated for String {
    fn state(self, _: &mut Told) -> String {
        self
    }
}

/// "1 XP row, 1 service call": the two figures every verdict on a race
/// states first, as facts, for the narrative to go on from.
pub fn rows_and_calls(xp_rows: u64, service_calls: u64) -> Told {
    let mut told = Told::new();
    tell!(
        told,
        "{}, {}",
        Counted(Fact::XpRows(xp_rows), "XP row"),
        Counted(Fact::ServiceCalls(service_calls), "service call")
    );
    told
}

/// "created 1, conflict 4": every outcome some request ended with, as
/// `count` counts them, each count a fact.
pub fn outcomes(count: impl Fn(Outcome) -> u64) -> Told {
    let mut told = Told::new();
    let counted = Outcome::ALL.iter().filter(|o| count(**o) > 0);
    for (i, o) in counted.enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        tell!(told, "{sep}{} {}", o.name(), Fact::Answered(*o, count(*o)));
    }
    told
}

/// A narrative and the facts it states.
#[derive(Debug, Default)]
pub struct Told {
    text: String,
    facts: Vec<Fact>,
}

/// Appends to a [`Told`]: `tell!(t, "{} did the work", Counted(fact, "worker"))`.
/// Every argument is [`Stated`], so a bare number cannot slip in unchecked.
macro_rules! tell {
    ($told:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {{
        let told: &mut $crate::race::told::Told = &mut $told;
        let line = format!($fmt $(, $crate::race::told::Stated::state($arg, told))*);
        told.push(&line);
    }};
}
pub(crate) use tell;

impl Told {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends text; its figures must have gone in through [`tell!`].
    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Appends another narrative, facts and all.
    pub fn append(&mut self, other: Told) {
        self.text.push_str(&other.text);
        self.facts.extend(other.facts);
    }

    /// Keeps a fact the text states in words ("called once").
    pub fn also(&mut self, fact: Fact) {
        self.facts.push(fact);
    }

    /// The facts that `r` does not bear out, each said with what `r` shows.
    pub fn disagreements(&self, r: &RaceResult) -> Vec<String> {
        self.facts
            .iter()
            .filter_map(|f| f.against(r).map(|found| format!("{f:?}: {found}")))
            .collect()
    }

    /// The narrative, once every fact in it is checked against `r`.
    pub fn finish(self, r: &RaceResult) -> String {
        let wrong = self.disagreements(r);
        self.checked(wrong)
    }

    /// The same for a race on another engine (MariaDB).
    pub fn finish_on_engine(self, r: &crate::race::mariadb::EngineResult) -> String {
        let wrong: Vec<String> = self
            .facts
            .iter()
            .filter_map(|f| f.against_engine(r).map(|found| format!("{f:?}: {found}")))
            .collect();
        self.checked(wrong)
    }

    /// The narrative if nothing in it was wrong.
    fn checked(self, wrong: Vec<String>) -> String {
        if wrong.is_empty() {
            return self.text;
        }
        let why = wrong.join("; ");
        if cfg!(debug_assertions) {
            panic!("a sentence disagrees with its race ({why}): {}", self.text);
        }
        format!("(idem left out its sentence on this race: it disagreed with the figures: {why})")
    }
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn a_noun_ending_in_y_after_a_consonant_takes_ies_and_after_a_vowel_s() {
        assert_eq!(counted(2, "retry"), "2 retries");
        assert_eq!(counted(2, "key"), "2 keys");
        assert_eq!(counted(1, "key"), "1 key");
        assert_eq!(counted(3, "worker"), "3 workers");
    }
}
