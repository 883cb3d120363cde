//! The seven lessons told in short screens, each pointing at the demonstrations that prove it.

/// One lesson: its title, one line, a few screens, what to look at, and an experiment.
pub struct Lesson {
    pub number: u8,
    pub title: &'static str,
    pub line: &'static str,
    pub screens: &'static [&'static str],
    pub look_at: &'static str,
    pub experiment: &'static str,
}

pub const LESSONS: [Lesson; 7] = [
    Lesson {
        number: 1,
        title: "Duplicate keys vs. duplicate work",
        line: "Five requests, one key, check-then-store: one key row, four XP rows.",
        screens: &[
            "A check-then-store guard looks the key up, does the work if the key is missing, \
             then stores the key. Called once, it is right. Called five times at once, every \
             request that looks before the first store sees nothing, and every one of them works.",
            "The unique index on the key still does its job: only one key row survives. But it \
             speaks last, after the XP rows were written. It deduplicates keys, not work.",
            "Why four and not five? The pool has five connections and the runner holds one. The \
             fifth request waits for a connection, and when it gets one the key is there.",
        ],
        look_at: "the key rows (1) against the XP rows (4), and the fifth worker's checkout wait",
        experiment: "idem race --pool-size 6     (five connections for five workers: 5 XP rows)",
    },
    Lesson {
        number: 2,
        title: "Reserve before you work",
        line: "Claim, work, complete: the unique index decides before any work runs.",
        screens: &[
            "Keep the three steps, change their order. First claim the key: insert it as pending. \
             The unique index lets exactly one insert in. Only its owner does the work, then \
             completes the claim with the response.",
            "The losers never reach the work. The race still happens, but now it is a race for the \
             claim, and the database referees it.",
            "Step by step, the difference is plain: the interleaving in which both requests find \
             no key makes two XP rows under check-then-store, and one under claim-work-complete.",
        ],
        look_at: "XP rows stay at 1 in every run, and the same schedule gives 2 under check-then-store",
        experiment: "idem step --workers 2      (choose who moves next yourself)",
    },
    Lesson {
        number: 3,
        title: "What the loser does",
        line: "Fail fast with 409, poll, or block, and what each costs.",
        screens: &[
            "A loser that finds the claim pending has three choices. Fail fast: answer 409 Conflict \
             now and let the client retry later with the same key, as Stripe and the IETF draft do.",
            "Poll: give the connection back, wait a little, read again, and replay the response once \
             it is there. The client waits in one request; the price is the reads.",
            "Block: wait on the winner's lock. It is the least code, but each waiting loser holds a \
             pooled connection, and with a small pool the requests behind them get none at all.",
        ],
        look_at: "the status counts per policy, the reads of poll, and the checkout timeouts of block",
        experiment: "idem compare --losers --work-ms 100",
    },
    Lesson {
        number: 4,
        title: "The key means the request, not just the operation",
        line: "A fingerprint of the parameters turns a reused key into a 422, not a wrong replay.",
        screens: &[
            "A key says which request this is. It does not say what the request asked. If a client \
             reuses a key for 20 XP after spending it on 10, a guard that only checks the key \
             replays the 10 XP answer and calls it success.",
            "Store a fingerprint, a hash of the parameters in a fixed order, next to the key. A \
             request whose fingerprint differs gets 422 and does nothing.",
        ],
        look_at: "the 422s of the workers that asked for other amounts, and the wrong replays without fingerprints",
        experiment: "idem race -s claim-work-complete --amounts 10,20,10,30,10 --no-fingerprint --loser poll",
    },
    Lesson {
        number: 5,
        title: "Where the reservation lives",
        line: "A Postgres table versus a Solid-Cache-style store: durability, audit, expiry.",
        screens: &[
            "A cache can hold claims too, and Solid Cache is even backed by a database. But its \
             write-unless-exist locks a row that must already exist: while the entry is missing, \
             concurrent claims all see nothing and all win.",
            "A cache also forgets on its own: entries are evicted oldest-first when it is full, \
             whatever their expiry. A retry after that is a new request.",
            "The table remembers who claimed, when, with what, and how long it took, until a \
             reaper deletes completed keys past their retention.",
        ],
        look_at: "duplicates on the cache store, the retry after eviction, and what an audit finds",
        experiment: "idem stores     and     idem reap --older-than 72h",
    },
    Lesson {
        number: 6,
        title: "Designing the key itself",
        line: "Random keys are lost with the client; keys derived from the intent survive it.",
        screens: &[
            "The server did the work, the response never arrived, the client reloads and sends \
             again. A random key made at start-up died with the crash: the retry is a new request.",
            "Derive the key from the fields that identify the intent: the operation, the user, the \
             lesson. Every retry makes the same key. Derive it from too few, and two different \
             awards share one key.",
        ],
        look_at: "XP rows per key kind, and the merged intents of the coarse key",
        experiment: "idem keys --crash-at before-send     (nothing was sent: no key needed)",
    },
    Lesson {
        number: 7,
        title: "Putting idempotency keys together",
        line: "The whole guard: claim, work and complete in one transaction, rescue, retry, recovery.",
        screens: &[
            "Put the work and the completion in one transaction, so that a crash leaves either both \
             or neither. A claim whose owner died stays pending; after a lock timeout, one later \
             request may take it over, with a single conditional update so two cannot.",
            "When the work fails, decide what a retry should see: the stored 500 (Stripe) or a \
             fresh attempt (Powertools). Retry transient database failures with the same key, and \
             let everything else surface.",
            "Then build your own: examples/challenge.rs starts as check-then-store and fails. \
             cargo run --example challenge tells you which cases hold.",
        ],
        look_at: "one XP row after every crash, and check-then-store's duplicate under the same fault",
        experiment: "idem race -s guard --crash after-claim --recovery-retries 2 --trace",
    },
];
