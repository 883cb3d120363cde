//! Learn by doing: a guard file per lesson with the lesson's flaw in it, the races that judge it, hints in stages.
//!
//! `idem exercise N` copies lesson N's file out, `idem check N` races the
//! learner's file with the lesson's [`cases`], and `idem hint N` gives the
//! [`Exercise::hints`] one at a time, then, after a pass, [`Exercise::why`].
//! The reference answers ship beside them (`exercises/solutions/`) and
//! must pass their own cases (the tests hold them to it).

pub mod cases;
pub mod explored;
pub mod fingerprint;
pub mod key_design;
pub mod loser_choice;
pub mod owner;
pub mod scheduler;
pub mod standby_choice;
pub mod store_choice;

use std::path::Path;

use anyhow::Result;

use crate::db::Database;
use crate::probe::conformance::Check;

/// One lesson's exercise.
#[derive(Debug)]
pub struct Exercise {
    pub lesson: u8,
    /// The file's name, as `idem exercise` writes it.
    pub file: &'static str,
    /// What to achieve, in one line.
    pub goal: &'static str,
    /// How to see what the file does, `{file}` standing for its path.
    pub try_it: &'static str,
    /// The file to start from, with the lesson's flaw in it.
    pub start: &'static str,
    /// A reference answer.
    pub solution: &'static str,
    /// A nudge, then the statement to change, then the answer's idea.
    pub hints: [&'static str; 3],
    /// Why the answer works, for after a pass.
    pub why: &'static str,
}

impl Exercise {
    /// The name the solution is written under, beside the learner's file.
    pub fn solution_file(&self) -> String {
        self.file.replace(".toml", ".solution.toml")
    }
}

/// How a guard file is seen in action: lesson 1's race.
const RACE_IT: &str = "idem race --strategy-file {file} --pool-size 6";

/// Every exercise, by lesson.
pub const EXERCISES: [Exercise; 10] = [
    Exercise {
        lesson: 1,
        file: "1-two-orders.toml",
        goal: "an order of two check-then-store requests' steps that makes two XP rows, and one that makes one",
        try_it: "idem step -s check-then-store --workers 2 --work-ms 0",
        start: include_str!("../../exercises/1-two-orders.toml"),
        solution: include_str!("../../exercises/solutions/1-two-orders.toml"),
        hints: [
            "A request works when its find sees no key. When does request 2's find see \
             request 1's key, and when does it not?",
            "Request 1's store is its fourth step, request 2's find its second. For two rows, \
             both finds must come before either store; for one, a store before the other's find.",
            "makes_two = [1, 1, 2, 2, 1, 1, 2, 2]: both check out and find, then both work and \
             store. makes_one = [1, 1, 1, 1, 2, 2]: request 1 is done before request 2 looks.",
        ],
        why: "Check-then-store is right in every order where one request's store comes \
              before the other's find, and wrong in every order where both finds come first. \
              A burst of five at once is almost always the second kind; the pool decides how \
              many requests can be in it.",
    },
    Exercise {
        lesson: 2,
        file: "2-claim-first.toml",
        goal: "one XP row when five requests with one key arrive at once, and no work for the other four",
        try_it: RACE_IT,
        start: include_str!("../../exercises/2-claim-first.toml"),
        solution: include_str!("../../exercises/solutions/2-claim-first.toml"),
        hints: [
            "The find and the store are two statements with the work between them. Every \
             request that finds nothing before the first store goes on to work. What could \
             be written before the work instead of after it?",
            "Change the shape to claim-work-complete. Its claim is an INSERT of the key as \
             'pending' that returns the row's id (RETURNING id) when it gets in, and nothing \
             when the key is already there (ON CONFLICT (key) DO NOTHING).",
            "The unique index on idempotency_keys.key decides at the claim, before any work: \
             one INSERT gets in, the others get no row back, read the claim (replay) and \
             answer 409 or the stored response.",
        ],
        why: "The decision moved from the store (after the work) to the claim (before it). \
              The unique index lets one INSERT in however the requests interleave, so \
              exactly one of them ever reaches the work.",
    },
    Exercise {
        lesson: 3,
        file: "3-the-loser.toml",
        goal: "a loser policy and timings that answer every client in one request, on a small pool too, without flooding the database with reads",
        try_it: "idem compare --losers --work-ms 300",
        start: include_str!("../../exercises/3-the-loser.toml"),
        solution: include_str!("../../exercises/solutions/3-the-loser.toml"),
        hints: [
            "Fail-fast answers 409 and leaves the waiting to the client. Which policies \
             wait inside the request, and what does each hold while it waits?",
            "Block holds a pooled connection for the whole wait: twenty requests on four \
             connections leave sixteen with none. Poll gives its connection back between \
             reads; how often it reads sets both how late it answers and how many reads \
             it sends.",
            "loser = \"poll\", a poll_ms well under the 200 ms of slack (a late read costs \
             up to one interval) and over 10 ms (300 ms of work / 30 reads), and a \
             wait_timeout_ms longer than the work: poll_ms = 25, wait_timeout_ms = 1000.",
        ],
        why: "Waiting inside the request costs something: block costs a connection for \
              the whole wait, which a small pool cannot spare; poll costs a read each \
              interval and answers up to one interval late. So the interval is a trade \
              between latency and load, and the wait must outlast the work or the loser \
              gives up with 409 anyway.",
    },
    Exercise {
        lesson: 4,
        file: "4-fingerprint.toml",
        goal: "a fingerprint, computed in SQL, that tells apart every two requests asking for different things",
        try_it: "idem race --strategy-file {file} --pool-size 6 --amounts 10,20,10,30,10",
        start: include_str!("../../exercises/4-fingerprint.toml"),
        solution: include_str!("../../exercises/solutions/4-fingerprint.toml"),
        hints: [
            "The fingerprint step's result is all a loser compares. Two requests that ask \
             for different things must get different results; which of what a request asks \
             does md5($operation) leave out?",
            "Put every field in: $operation, $user_id, $amount and $lesson. Then try the \
             last case by hand: does 12 XP for lesson 3 read differently from 1 XP for \
             lesson 23 in what you hash?",
            "Keep the fields apart with a separator before hashing: \
             md5(concat_ws('|', $operation, $user_id, $amount, $lesson)).",
        ],
        why: "A fingerprint is a name for everything the request asks, so two requests get \
              the same one only when they ask the same thing. Leave out a field and a \
              request that differs only there is taken for a retry; run the fields together \
              and two different requests can spell the same text. The claim stores it, so \
              every later request with the key compares against the first one's.",
    },
    Exercise {
        lesson: 5,
        file: "5-the-store.toml",
        goal: "the client's retry is replayed after an award, whatever cache traffic the rest of the app sends",
        try_it: "idem race -s claim-work-complete --workers 1 --store cache \
                 --cache-max-entries 50 --cache-pressure 60",
        start: include_str!("../../exercises/5-the-store.toml"),
        solution: include_str!("../../exercises/solutions/5-the-store.toml"),
        hints: [
            "Race it with --json and look at the retry: it found no claim. Who removed it?",
            "The cache evicted it to make room for other entries. A bigger cache_max_entries \
             passes the lesson's sixty writes; try the check's second case with it.",
            "Any size is a bet on the traffic. store = \"table\" keeps claims in the key \
             table, which evicts nothing.",
        ],
        why: "A cache is allowed to forget, and what it forgets depends on traffic the guard \
              does not control, so a claim kept there is lost when the cache is busy. The key \
              table keeps a claim until a reaper deletes it, after a retention you chose.",
    },
    Exercise {
        lesson: 6,
        file: "6-the-key.toml",
        goal: "a key the client makes the same after every restart, for one award, and different for every other award",
        try_it: "idem keys --key-file {file} --intents 3",
        start: include_str!("../../exercises/6-the-key.toml"),
        solution: include_str!("../../exercises/solutions/6-the-key.toml"),
        hints: [
            "A random key is made when the client starts, and a crash starts it again. What \
             does the client still know after a restart?",
            "The award it is making: the operation, the user and the lesson. Build the key \
             from those fields, with no {random} in it.",
            "Check the other way too: would two different awards by one user ever make the same \
             key? Each field that tells two awards apart belongs in it: {user_id} and {lesson}.",
        ],
        why: "A key must name the intent, not the attempt: made from the award's own fields it \
              survives every restart, and made from all of them it never matches a different \
              award. Fewer fields merge awards; a random part forgets retries.",
    },
    Exercise {
        lesson: 7,
        file: "7-stale-claim.toml",
        goal: "a stale claim is taken over once, a live one never, and only its owner completes it",
        try_it: RACE_IT,
        start: include_str!("../../exercises/7-stale-claim.toml"),
        solution: include_str!("../../exercises/solutions/7-stale-claim.toml"),
        hints: [
            "The takeover's WHERE decides which pending claims may be taken. Which pending \
             claims should not be?",
            "Add to the WHERE that the claim has been pending longer than the stale-claim age: \
             idempotency_keys.locked_at < now() - $stale_after_ms * interval '1 millisecond'. \
             Then make complete update the row only WHERE worker = $worker.",
            "One statement both tests and takes: two retries that arrive together queue on \
             the row, and the second re-checks the WHERE on the row the first left, which is \
             no longer stale.",
        ],
        why: "ON CONFLICT DO UPDATE WHERE is a test-and-set on the claim's row: the row lock \
              makes the second taker see the first taker's locked_at, so a stale claim changes \
              hands once. The owner check on completion keeps a request whose claim was taken \
              from storing a response over its successor's.",
    },
    Exercise {
        lesson: 8,
        file: "8-one-call.toml",
        goal: "one award service call and one XP row, the other requests answered 201 from the stored key",
        try_it: RACE_IT,
        start: include_str!("../../exercises/8-one-call.toml"),
        solution: include_str!("../../exercises/solutions/8-one-call.toml"),
        hints: [
            "SERIALIZABLE rolls the losers back after their work, when the service has already \
             been called. What would make them wait before the work instead?",
            "Add a lock step, which runs before the find: SELECT \
             pg_advisory_xact_lock(hashtextextended($key, 0)). Then think about which \
             isolation level lets the find after the wait see the key stored meanwhile.",
            "The lock makes requests with one key take turns until each transaction ends. At \
             read-committed each statement sees what committed before it began, so the \
             second request's find sees the first's key.",
        ],
        why: "A transaction undoes rows, not calls: only making the requests wait before the \
              work saves the service. The advisory lock is that wait; READ COMMITTED lets the \
              find after it see the stored key, where a snapshot taken at the lock would not.",
    },
    Exercise {
        lesson: 9,
        file: "9-heartbeat.toml",
        goal: "a claim whose work outlasts the stale-claim age is never taken over while it works, and still goes stale once its request is dropped",
        try_it: "idem race --strategy-file {file} --http --work-ms 600 --stale-after-ms 200 \
                 --hang-up at=during-work --on-hangup finish",
        start: include_str!("../../exercises/9-heartbeat.toml"),
        solution: include_str!("../../exercises/solutions/9-heartbeat.toml"),
        hints: [
            "Race it with --trace: the retry took over a claim whose owner was still \
             working. What did the claim look like to the retry, and what would have \
             made it look alive?",
            "Its locked_at was older than the stale-claim age. Add a renew step that \
             moves it forward while the work runs, and race with --heartbeat-ms 50: \
             UPDATE idempotency_keys SET locked_at = now() WHERE id = $claim_id ...",
            "Renew only what is still this owner's and still pending: WHERE id = \
             $claim_id AND worker = $worker AND status = 'pending'. A renewal of a \
             claim that changed hands would keep the new owner's claim alive for the old.",
        ],
        why: "A stale-claim age is a guess at the longest work; a heartbeat replaces the \
              guess with a sign of life. The renewal comes from a connection of its own, so \
              it commits while the work's connection is busy, and it stops when the request \
              is dropped, so only a silent owner's claim ages. The age can then be short: a \
              few beats, not the slowest work.",
    },
    Exercise {
        lesson: 10,
        file: "10-the-standby.toml",
        goal: "a guard that keeps one award with a lagging standby beside it, and keeps an answered key through a failover",
        try_it: "idem race -s check-then-store --standby --read-from standby \
                 --replica-delay-ms 200",
        start: include_str!("../../exercises/10-the-standby.toml"),
        solution: include_str!("../../exercises/solutions/10-the-standby.toml"),
        hints: [
            "Two cases, two questions. With the standby 200 ms behind, what decides who \
             works: a read, or a write? And when the primary fails, what had a commit \
             waited for before the client was told 201?",
            "A find can read stale data wherever it goes; a claim is an INSERT, and the \
             unique index on the primary decides. For the failover, a commit that waits \
             for the primary alone can be acknowledged and then lost with it.",
            "strategy = \"claim-work-complete\" (the reads then only choose what a loser \
             answers, so read_from may stay on the standby) and synchronous = \
             \"remote_apply\": a commit returns once the standby has applied it.",
        ],
        why: "A guard that decides by writing does not care how stale its reads are: the \
              primary's unique index lets one claim in. But the guard's memory is only as \
              durable as its commit: asynchronous replication acknowledges a key the \
              standby may never get, and a failover then forgets it. remote_apply makes \
              every 201 a promise the standby keeps, for a round trip per commit.",
    },
];

/// Reads lesson `lesson`'s kind of file at `path` (a guard file, or
/// lesson 6's key file), so that a broken one is refused before any
/// database starts.
pub fn read(lesson: u8, path: &Path) -> Result<()> {
    match lesson {
        1 => scheduler::Orders::load(path).map(drop),
        3 => loser_choice::LoserChoice::load(path).map(drop),
        5 => store_choice::StoreChoice::load(path).map(drop),
        6 => crate::keys::KeyTemplate::load(path).map(drop),
        10 => standby_choice::StandbyChoice::load(path).map(drop),
        _ => crate::strategy::guard_file::load(path).map(drop),
    }
}

/// Judges the file at `path` with lesson `lesson`'s cases, on `db`.
pub async fn judge(db: &Database, lesson: u8, path: &Path) -> Result<Vec<Check>> {
    match lesson {
        1 => scheduler::judge(db, path).await,
        3 => loser_choice::judge(db, path).await,
        4 => fingerprint::judge(db, path).await,
        5 => store_choice::judge(db, path).await,
        6 => key_design::judge(db, path).await,
        10 => standby_choice::judge(db, path).await,
        _ => cases::judge(db, lesson, path).await,
    }
}

/// Lesson `n`'s exercise, if it has one.
pub fn for_lesson(n: u8) -> Option<&'static Exercise> {
    EXERCISES.iter().find(|e| e.lesson == n)
}

/// Why a lesson has no exercise of its own, said where one is asked for.
pub fn none_for(n: u8) -> String {
    let lessons: Vec<String> = EXERCISES.iter().map(|e| e.lesson.to_string()).collect();
    format!(
        "lesson {n} has no exercise yet; lessons {} have one",
        lessons.join(", ")
    )
}
