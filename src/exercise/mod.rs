//! Learn by doing: a guard file per lesson with the lesson's flaw in it, the races that judge it, hints in stages.
//!
//! `idem exercise N` copies lesson N's file out, `idem check N` races the
//! learner's file with the lesson's [`cases`], and `idem hint N` gives the
//! [`Exercise::hints`] one at a time, then, after a pass, [`Exercise::why`].
//! The reference answers ship beside them (`exercises/solutions/`) and
//! must pass their own cases (the tests hold them to it).

pub mod cases;

pub use cases::judge;

/// One lesson's exercise.
#[derive(Debug)]
pub struct Exercise {
    pub lesson: u8,
    /// The file's name, as `idem exercise` writes it.
    pub file: &'static str,
    /// What to achieve, in one line.
    pub goal: &'static str,
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

/// Every exercise, by lesson.
pub const EXERCISES: [Exercise; 6] = [
    Exercise {
        lesson: 1,
        file: "1-one-row.toml",
        goal: "one XP row when five requests with one key arrive at once, and no work for the other four",
        start: include_str!("../../exercises/1-one-row.toml"),
        solution: include_str!("../../exercises/solutions/1-one-row.toml"),
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
        lesson: 2,
        file: "2-one-winner.toml",
        goal: "one request wins the claim; the others lose it and do no work",
        start: include_str!("../../exercises/2-one-winner.toml"),
        solution: include_str!("../../exercises/solutions/2-one-winner.toml"),
        hints: [
            "Look at what the claim returns for the second request with the same key. A \
             row back means \"you won\".",
            "ON CONFLICT (key) DO UPDATE ... RETURNING id returns the row to every request, \
             the first and all the others.",
            "ON CONFLICT (key) DO NOTHING RETURNING id returns a row only to the INSERT that \
             got in; the others get none, and lose.",
        ],
        why: "A claim is a test-and-set: the winner is told so by the row it gets back. An \
              upsert sets whatever the test said, so everyone wins; DO NOTHING keeps the \
              first claim and says so to no one else.",
    },
    Exercise {
        lesson: 3,
        file: "3-the-loser.toml",
        goal: "a loser is told 409 while the claim is pending, and replays the response once it is completed",
        start: include_str!("../../exercises/3-the-loser.toml"),
        solution: include_str!("../../exercises/solutions/3-the-loser.toml"),
        hints: [
            "Race it with --trace and read what each loser's replay step saw, and when: \
             the winner had not completed yet.",
            "The replay step's status column is what tells a pending claim from a completed \
             one, and this one is the constant 'completed'.",
            "Return the row's own status: SELECT status, response_body FROM \
             idempotency_keys WHERE key = $key.",
        ],
        why: "A pending claim has no response to replay. Telling the loser 409 makes its \
              client retry later, when the claim is completed and the replay carries the \
              winner's response; with --loser poll the app waits for that itself.",
    },
    Exercise {
        lesson: 4,
        file: "4-fingerprint.toml",
        goal: "422 for every request whose amount differs from the winner's",
        start: include_str!("../../exercises/4-fingerprint.toml"),
        solution: include_str!("../../exercises/solutions/4-fingerprint.toml"),
        hints: [
            "idem compares the request_fingerprint a loser reads with its own. Which \
             fingerprint does it read here?",
            "The claim writes NULL into request_fingerprint, and a missing fingerprint never \
             differs.",
            "Store the request's fingerprint with the claim: $fingerprint in place of NULL.",
        ],
        why: "The claim is the first row written for a key, and every later request reads \
              it, pending or completed. With the fingerprint in it, a request that reuses \
              the key for something else is told 422 instead of being taken for a retry.",
    },
    Exercise {
        lesson: 7,
        file: "7-stale-claim.toml",
        goal: "a stale claim is taken over once, a live one never, and only its owner completes it",
        start: include_str!("../../exercises/7-stale-claim.toml"),
        solution: include_str!("../../exercises/solutions/7-stale-claim.toml"),
        hints: [
            "The takeover's WHERE decides which pending claims may be taken. Which pending \
             claims should not be?",
            "Add to the WHERE that the claim has been pending longer than the lock timeout: \
             idempotency_keys.locked_at < now() - $lock_timeout_ms * interval '1 millisecond'. \
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
];

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
