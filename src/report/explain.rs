//! One sentence on why a race came out as it did, read off the race's own trace.

use crate::http::app::OnHangup;
use crate::race::{Outcome, RaceResult, WorkerReport, xp_rows};
use crate::store::StoreKind;
use crate::strategy::Step;
use crate::strategy::spec::Story;
use crate::strategy::transaction::Transaction;

/// Explains the figure from what the workers did.
pub fn explain(r: &RaceResult) -> String {
    let mut text = match r.replicas {
        1 => what_the_strategy_did(r),
        _ => over_replicas(r),
    };
    text.push_str(&after_the_retry(r));
    text.push_str(&after_a_hang_up(r));
    if r.strategy.spec().story != Story::Guard {
        text.push_str(&crash_consequence(r));
    }
    text.push_str(&what_else_happened(r));
    text
}

/// The sentence about the strategy itself: who did the work, and why.
fn what_the_strategy_did(r: &RaceResult) -> String {
    // A failover's retry went to another server: the failover's part tells it.
    let made = r
        .reports
        .iter()
        .filter(|w| w.made_xp.is_some() && !(w.retry && r.failover.is_some()))
        .count();
    if r.transaction == Transaction::Request {
        return in_transaction(r);
    }
    match r.strategy.spec().story {
        Story::NoKey => {
            format!("With no key, every worker that ran did the work: {made} XP rows.")
        }
        Story::CheckThenStore => check_then_store(r, made),
        Story::ClaimFirst if r.store == StoreKind::Cache => claims_in_the_cache(r),
        Story::ClaimFirst => claim_work_complete(r),
        Story::Guard => guard(r),
        Story::IndexAtInsert => format!(
            "The XP table's unique index decided at the insert itself: {made} row made, {} found it and replayed.",
            r.count(Outcome::Replayed)
        ),
        Story::ProcessMap => memory(r),
        // These run in the request's transaction only (refused without one).
        Story::RequestTransaction => in_transaction(r),
    }
}

/// Over several app processes: the course's arithmetic, per process.
fn over_replicas(r: &RaceResult) -> String {
    let per = |made: bool| -> Vec<usize> {
        (1..=r.replicas)
            .map(|i| {
                r.reports
                    .iter()
                    .filter(|w| w.replica == Some(i) && (!made || w.made_xp.is_some()))
                    .count()
            })
            .collect()
    };
    let list = |counts: Vec<usize>| {
        counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (reached, made) = (list(per(false)), list(per(true)));
    let n = r.replicas;
    match r.strategy.spec().story {
        Story::ProcessMap => format!(
            "Each of the {n} app processes kept a map of its own, and each let its first request \
             claim the key: requests per process {reached}, work done {made}, so {}. A claim must \
             live where every process sees it.",
            xp_rows(r.xp_rows)
        ),
        Story::CheckThenStore if r.isolation.is_none() => format!(
            "The requests went to {n} app processes in turn ({reached}), each with its own pool of \
             {} ({} for requests): at each, as many did the work as got a connection there before \
             the first key was stored ({made}), so {}.",
            r.pool_size,
            r.pool_size - usize::from(r.runner_holds_connection),
            xp_rows(r.xp_rows)
        ),
        _ => format!(
            "{} The requests went to {n} app processes in turn ({reached}); their claims meet in \
             the one database.",
            what_the_strategy_did(r)
        ),
    }
}

/// The claim in the process's map: one process, so one claim.
fn memory(r: &RaceResult) -> String {
    let mut text = format!(
        "The process's own map let one request claim the key; {} found the claim pending and \
         answered 409",
        r.count(Outcome::Conflict)
    );
    match r.count(Outcome::Replayed) {
        0 => text.push('.'),
        n => text.push_str(&format!(", {n} found it completed and replayed.")),
    }
    text.push_str(
        " Every request reached this one process: another app process would keep a map of its own.",
    );
    text
}

/// Lesson 8: what the request's transaction saved (the rows) and what it
/// could not (the work).
fn in_transaction(r: &RaceResult) -> String {
    let level = r.isolation.map_or("", |i| i.name());
    let worked = r.reports.iter().filter(|w| took(w, Step::Work)).count();
    let calls = match r.service_calls {
        1 => "once".to_string(),
        n => format!("{n} times"),
    };
    let mut text = format!(
        "Each request ran in one {level} transaction. {} did the work, so the award service was \
         called {calls}",
        count(worked, "request"),
    );
    let rolled = r.rolled_back();
    if rolled > 0 {
        let mut codes: Vec<String> = r
            .reports
            .iter()
            .filter(|w| w.outcome == Outcome::Error)
            .filter_map(|w| w.error.as_ref().map(|e| e.label()))
            .collect();
        codes.sort();
        codes.dedup();
        text.push_str(&format!(
            "; {rolled} met {} and rolled back, taking their XP rows with them, so {} stands. \
             A rollback takes back rows, never a call already made.",
            codes.join(" or "),
            xp_rows(r.xp_rows)
        ));
    } else {
        text.push_str(&format!(", and {} stands.", xp_rows(r.xp_rows)));
    }
    let retried: u32 = r.reports.iter().map(|w| w.retries).sum();
    if retried > 0 {
        text.push_str(&format!(
            " {} ran a request's transaction again after a serialization failure; a retry that finds \
             the key replays it, but the work its first try did stays done.",
            count(retried as usize, "retry")
        ));
    }
    if r.reports.iter().any(|w| took(w, Step::Lock)) {
        let waited: f64 = r
            .reports
            .iter()
            .flat_map(|w| w.steps.iter().filter(|e| e.step == Step::Lock))
            .map(|e| e.end_ms - e.start_ms)
            .sum();
        text.push_str(&format!(
            " The advisory lock made the requests take turns; they waited {waited:.0} ms for it in all, \
             each holding a pooled connection."
        ));
    }
    text
}

/// `1 request`, `3 requests`; `1 retry`, `2 retries`.
fn count(n: usize, what: &str) -> String {
    match (n, what.strip_suffix('y')) {
        (1, _) => format!("1 {what}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {what}s"),
    }
}

/// Lesson 5: the cache's `write(unless_exist)` has nothing to lock.
fn claims_in_the_cache(r: &RaceResult) -> String {
    let racers = r
        .reports
        .iter()
        .filter(|w| !w.retry && w.made_xp.is_some())
        .count();
    if racers > 1 {
        format!(
            "write(unless_exist) found no entry to lock: {racers} workers each saw it missing, each \
             wrote it and was told it won, so {racers} did the work."
        )
    } else if r.workers == 1 {
        "One worker wrote the cache entry; no other raced it.".to_string()
    } else {
        "One worker wrote the cache entry first; the others found it.".to_string()
    }
}

/// Lesson 2 and 3: one claim wins; what the losers did while they waited.
fn claim_work_complete(r: &RaceResult) -> String {
    let n = |o: Outcome| r.count(o);
    let losers = r
        .reports
        .iter()
        .filter(|w| took(w, Step::Read) || w.waited.is_some())
        .count();
    let mut text = format!(
        "The unique index let one claim in before any work ran; {losers} lost the claim and did no \
         work ({} answered 409, {} replayed the completed response).",
        n(Outcome::Conflict),
        n(Outcome::Replayed)
    );
    let held: f64 = r
        .reports
        .iter()
        .filter_map(|w| w.waited.filter(|w| w.held_connection))
        .map(|w| w.ms)
        .sum();
    if held >= 1.0 {
        text.push_str(&format!(
            " Blocked losers held pooled connections for {:.0} ms in all while they waited.",
            held
        ));
    }
    let reads: u32 = r
        .reports
        .iter()
        .filter_map(|w| w.waited)
        .map(|w| w.reads)
        .sum();
    if reads > 0 {
        text.push_str(&format!(" Polling losers read the claim {reads} times, giving their connections back in between."));
    }
    text
}

/// Lesson 5: the client's retry after other cache writes.
fn after_the_retry(r: &RaceResult) -> String {
    let mut text = String::new();
    if let Some(retry) = r
        .reports
        .iter()
        .find(|w| w.retry)
        .filter(|_| r.cache_pressure > 0)
    {
        text.push_str(&match (retry.made_xp.is_some(), r.store) {
            (true, _) => format!(
                " Then {} other cache writes evicted the completed entry, and the client's retry found \
                 nothing and did the work again.",
                r.cache_pressure
            ),
            (false, StoreKind::Cache) => format!(
                " Then {} other cache writes did not reach the entry, and the retry replayed it.",
                r.cache_pressure
            ),
            (false, _) => format!(
                " Then {} other cache writes went by, and the retry found the completed claim in the key \
                 table, which nothing evicts, and replayed it.",
                r.cache_pressure
            ),
        });
    }
    text
}

/// Planned crashes that never struck, timeouts, 422s, wrong replays, errors.
fn what_else_happened(r: &RaceResult) -> String {
    let n = |o: Outcome| r.count(o);
    let mut text = String::new();
    if let Some(plan) = r.crash
        && n(Outcome::Crashed) == 0
    {
        let who = plan
            .worker
            .map_or("any worker".to_string(), |w| format!("worker {w}"));
        text.push_str(&format!(
            " The crash planned for {who} {} never struck: it only strikes a request that does the work, \
             and {who} did none. Leave out worker= to crash whichever request works.",
            plan.at.name()
        ));
    }
    let timeouts = n(Outcome::CheckoutTimeout);
    if timeouts > 0 {
        text.push_str(&format!(" {timeouts} gave up waiting for a connection"));
        let blocked = r
            .reports
            .iter()
            .filter(|w| w.waited.is_some_and(|w| w.held_connection))
            .count();
        if blocked > 0 {
            text.push_str(&format!(
                ": the pool's connections were held by the winner and {blocked} blocked losers."
            ));
        } else {
            text.push('.');
        }
    }
    let mismatched = n(Outcome::Mismatch);
    if mismatched > 0 {
        text.push_str(&format!(
            " {mismatched} sent the key with other parameters than the first request and got 422, with no work done."
        ));
    }
    if r.wrong_replays > 0 {
        text.push_str(&format!(
            " {} got the first request's stored result although they asked for something else: \
             without a fingerprint the guard cannot tell.",
            r.wrong_replays
        ));
    }
    let errors = n(Outcome::Error).saturating_sub(r.rolled_back());
    if errors > 0 {
        text.push_str(&format!(" {errors} failed with a database error."));
    }
    text
}

fn check_then_store(r: &RaceResult, made: usize) -> String {
    let first_store = r
        .reports
        .iter()
        .filter_map(|w| {
            w.steps
                .iter()
                .find(|e| e.step == Step::Store && e.note == "key stored")
        })
        .map(|e| e.end_ms)
        .fold(f64::INFINITY, f64::min);
    let late: Vec<&WorkerReport> = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Replayed)
        .filter(|w| w.steps.first().is_some_and(|c| c.end_ms >= first_store))
        .collect();
    let workers = |k: usize| {
        if k == 1 {
            "1 worker".to_string()
        } else {
            format!("{k} workers")
        }
    };
    let mut text = format!(
        "{} found no key before any was stored, so {} did the work",
        workers(made),
        if made == 1 { "it" } else { "each" }
    );
    // Finds on a lagging standby see the key late, whatever the pool.
    if let Some(standby) = r
        .standby
        .filter(|s| s.read_from == crate::race::ReadFrom::Standby)
    {
        text = format!(
            "{} found no key, so {} did the work: their finds read a hot standby that \
             applies each commit {} ms after the primary, so a key the primary already had \
             was not there yet.",
            workers(made),
            if made == 1 { "it" } else { "each" },
            standby.apply_delay_ms
        );
    } else if late.is_empty() {
        text.push('.');
    } else {
        let longest = late.iter().map(|w| w.checkout_wait_ms).fold(0.0, f64::max);
        text.push_str(&format!(
            "; {} waited up to {longest:.1} ms for a connection (pool {}, {} for the workers), \
             and by then the key existed.",
            workers(late.len()),
            r.pool_size,
            r.pool_size - usize::from(r.runner_holds_connection)
        ));
    }
    // Replays not explained by a wait for a connection: these simply looked
    // after the first store had committed.
    let replayed = r.count(Outcome::Replayed) as usize;
    let looked_late = replayed.saturating_sub(late.len());
    if looked_late > 0 {
        text.push_str(&format!(
            " {} looked after the first key was stored, found it, and replayed its result.",
            workers(looked_late)
        ));
    }
    if r.duplicates > 0 {
        text.push_str(&format!(
            " The unique index kept {} key row, but only after {} were already made.",
            r.key_rows,
            xp_rows(r.xp_rows)
        ));
    }
    text
}

fn took(w: &WorkerReport, step: Step) -> bool {
    w.steps.iter().any(|e| e.step == step)
}

fn guard(r: &RaceResult) -> String {
    let n = |o: Outcome| r.count(o);
    let mut text = format!(
        "The unique index let one claim in; the work and the completion committed together ({} created, {} \
         replayed, {} answered 409).",
        n(Outcome::Created),
        n(Outcome::Replayed),
        n(Outcome::Conflict)
    );
    let note = |w: &WorkerReport, needle: &str| w.steps.iter().any(|e| e.note.contains(needle));
    if let Some(w) = r.reports.iter().find(|w| w.outcome == Outcome::Crashed) {
        text.push_str(&format!(
            " Worker {} crashed and answered nothing; its transaction rolled back and its claim stayed pending.",
            w.worker
        ));
    }
    let retries: Vec<&WorkerReport> = r.reports.iter().filter(|w| w.retry).collect();
    if let Some(first) = retries.first()
        && !retries.iter().any(|w| note(w, "took over a stale claim"))
    {
        text.push_str(&format!(
            " The retry answered {} {}.",
            first.status,
            first.outcome.name()
        ));
    }
    if let Some(w) = r
        .reports
        .iter()
        .find(|w| note(w, "took over a stale claim"))
    {
        text.push_str(&format!(
            " After the stale-claim age a retry (worker {}) took the stale claim over and finished the work.",
            w.worker
        ));
    }
    if let Some(w) = r
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::Failed && !w.retry)
    {
        let retry = r.reports.iter().find(|w| w.retry);
        text.push_str(&format!(" Worker {}'s work failed; ", w.worker));
        text.push_str(match (w.did.contains("released"), retry.map(|r| r.outcome)) {
            (false, Some(Outcome::Failed)) => "the guard stored the 500, and the retry got the same 500 replayed (Stripe's choice).",
            (true, Some(Outcome::Created)) => "the guard released the claim, and the retry ran the work again (Powertools' choice).",
            (false, _) => "the guard stored the 500.",
            (true, _) => "the guard released the claim.",
        });
    }
    if let Some(w) = r.reports.iter().find(|w| note(w, "connection killed")) {
        let resumed = note(w, "resumed own claim");
        text.push_str(&format!(
            " Worker {}'s connection was killed mid-work; the transaction rolled back{}.",
            w.worker,
            if resumed {
                ", and it retried with the same key, resumed its own claim and completed it"
            } else {
                ""
            }
        ));
    }
    text
}

/// A client that hung up mid-request (lesson 9): what the app did with its
/// request, and what the client's retry got.
fn after_a_hang_up(r: &RaceResult) -> String {
    let Some(plan) = r.hang_up else {
        return String::new();
    };
    let Some(gone) = r
        .reports
        .iter()
        .find(|w| !w.retry && w.did.starts_with("hung up"))
    else {
        let who = plan
            .worker
            .map_or_else(|| "a worker".to_string(), |w| format!("worker {w}"));
        return format!(
            " The hang-up planned for {who} never struck: a client hangs up once its request's \
             work has begun, and {who} was answered first."
        );
    };
    let app = match r.on_hangup {
        OnHangup::Cancel => {
            "the app dropped its request at its next await (--on-hangup cancel, as hyper does)"
        }
        OnHangup::Finish => {
            "the app ran its request to the end anyway (--on-hangup finish, as Puma and Node do)"
        }
    };
    let got = match r.reports.iter().find(|w| w.retry) {
        Some(retry) if retry.did.contains("stuck") => format!(
            "its retry (worker {}) was answered 409 until it gave up: the claim stays pending \
             for good, and the key is stuck",
            retry.worker
        ),
        Some(retry) => format!(
            "its retry (worker {}) got {} {}",
            retry.worker,
            retry.status,
            retry.outcome.name()
        ),
        None => "it did not retry".to_string(),
    };
    format!(
        " Worker {}'s client hung up halfway through its work; {app}; {got}.",
        gone.worker
    )
}

/// For the shapes without recovery: what a crash left behind.
fn crash_consequence(r: &RaceResult) -> String {
    let Some(crashed) = r.reports.iter().find(|w| w.outcome == Outcome::Crashed) else {
        return String::new();
    };
    let point = crashed.saw.trim_start_matches("crashed ");
    let mut text = format!(
        " Worker {} crashed {point} and answered nothing.",
        crashed.worker
    );
    let retried_409 = r
        .reports
        .iter()
        .any(|w| w.retry && w.outcome == Outcome::Conflict);
    match r.strategy.spec().story {
        Story::CheckThenStore if r.duplicates > 0 => text.push_str(
            " Its XP row stayed, but its key was never stored, so a later request found no key and did the work again.",
        ),
        Story::ClaimFirst if retried_409 => text.push_str(
            " Its claim stays pending for good: nothing may take it over, so every retry answers 409.",
        ),
        _ => {}
    }
    text
}
