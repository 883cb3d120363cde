//! One sentence on why a race came out as it did, read off the race's own
//! trace. Every figure it names is a [`Fact`], checked against the race
//! before it is shown ([`super::told`]).

use crate::http::app::OnHangup;
use crate::race::told::{Counted, Fact, Setting, Told, Who, tell};
use crate::race::{Outcome, RaceResult, WorkerReport};
use crate::request::fault::FaultPoint;
use crate::store::StoreKind;
use crate::strategy::Step;
use crate::strategy::spec::Story;
use crate::strategy::transaction::Transaction;

/// Explains the figure from what the workers did, once every figure the
/// sentence names is checked against the race.
pub fn explain(r: &RaceResult) -> String {
    told(r).finish(r)
}

/// The sentence with its facts, not yet checked (for the tests that hold
/// sentences to their races).
pub fn told(r: &RaceResult) -> Told {
    let mut t = match r.replicas {
        1 => what_the_strategy_did(r),
        _ => over_replicas(r),
    };
    after_the_retry(&mut t, r);
    after_a_hang_up(&mut t, r);
    if r.strategy.spec().story != Story::Guard {
        crash_consequence(&mut t, r);
    }
    what_else_happened(&mut t, r);
    t
}

/// `N XP rows`, as a fact.
fn xp(r: &RaceResult) -> Counted {
    Counted(Fact::XpRows(r.xp_rows), "XP row")
}

/// How many requests ended with `o`, as a fact.
fn ended(r: &RaceResult, o: Outcome) -> Fact {
    Fact::Answered(o, r.count(o))
}

/// The sentence about the strategy itself: who did the work, and why.
fn what_the_strategy_did(r: &RaceResult) -> Told {
    let mut t = Told::new();
    if r.transaction == Transaction::Request {
        return in_transaction(r);
    }
    match r.strategy.spec().story {
        Story::NoKey => tell!(
            t,
            "With no key, every request did the work: {}.",
            Counted(worked(r), "request")
        ),
        Story::CheckThenStore => return check_then_store(r),
        Story::ClaimFirst if r.store == StoreKind::Cache => return claims_in_the_cache(r),
        Story::ClaimFirst if r.store == StoreKind::Redis => {
            return super::explain_redis::claims_in_redis(r);
        }
        Story::ClaimFirst => return claim_work_complete(r),
        Story::Guard => return guard(r),
        Story::IndexAtInsert => tell!(
            t,
            "The XP table's unique index decided at the insert itself: {} made, {} found it and replayed.",
            xp(r),
            ended(r, Outcome::Replayed)
        ),
        Story::ProcessMap => return memory(r),
        // These run in the request's transaction only (refused without one).
        Story::RequestTransaction => return in_transaction(r),
    }
    t
}

/// The requests that did the work, as a fact. A failover's retry went to
/// another server, and the failover's part tells it: only the burst here.
fn worked(r: &RaceResult) -> Fact {
    let who = match r.failover {
        Some(_) => Who::FirstTryWorked,
        None => Who::DidWork,
    };
    let n = r
        .reports
        .iter()
        .filter(|w| w.took(Step::Work) && !(w.retry && r.failover.is_some()))
        .count();
    Fact::Requests(n, who)
}

/// Over several app processes: the course's arithmetic, per process.
fn over_replicas(r: &RaceResult) -> Told {
    let per = |made: bool| -> Vec<usize> {
        (1..=r.replicas)
            .map(|i| {
                r.reports
                    .iter()
                    .filter(|w| w.replica == Some(i) && (!made || w.took(Step::Work)))
                    .count()
            })
            .collect()
    };
    let list = |counts: &[usize]| {
        counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (reached, made) = (per(false), per(true));
    // The per-process figures are checked through their sum.
    let total_made = Fact::Requests(made.iter().sum(), Who::DidWork);
    let n = Fact::Setting(Setting::Replicas, r.replicas as u64);
    let mut t = Told::new();
    match r.strategy.spec().story {
        Story::ProcessMap => tell!(
            t,
            "Each of the {} app processes kept a map of its own, and each let its first request \
             claim the key: requests per process {}, work done {} ({} in all), so {}. A claim must \
             live where every process sees it.",
            n,
            list(&reached),
            list(&made),
            total_made,
            xp(r)
        ),
        Story::CheckThenStore if r.isolation.is_none() => tell!(
            t,
            "The requests went to {} app processes in turn ({}), each with its own pool of \
             {} ({} for requests): at each, as many did the work as got a connection there before \
             the first key was stored ({}; {} in all), so {}.",
            n,
            list(&reached),
            pool(r),
            pool_for_workers(r),
            list(&made),
            total_made,
            xp(r)
        ),
        _ => {
            t.append(what_the_strategy_did(r));
            tell!(
                t,
                " The requests went to {} app processes in turn ({}); their claims meet in \
                 the one database.",
                n,
                list(&reached)
            );
        }
    }
    t
}

fn pool(r: &RaceResult) -> Fact {
    Fact::Setting(Setting::Pool, r.pool_size as u64)
}

fn pool_for_workers(r: &RaceResult) -> Fact {
    let n = r.pool_size - usize::from(r.runner_holds_connection);
    Fact::Setting(Setting::PoolForWorkers, n as u64)
}

/// The claim in the process's map: one process, so one claim.
fn memory(r: &RaceResult) -> Told {
    let mut t = Told::new();
    tell!(
        t,
        "The process's own map let one request claim the key; {} found the claim pending and \
         answered 409",
        ended(r, Outcome::Conflict)
    );
    match r.count(Outcome::Replayed) {
        0 => t.push("."),
        _ => tell!(
            t,
            ", {} found it completed and replayed.",
            ended(r, Outcome::Replayed)
        ),
    }
    t.push(
        " Every request reached this one process: another app process would keep a map of its own.",
    );
    t
}

/// Lesson 8: what the request's transaction saved (the rows) and what it
/// could not (the work).
fn in_transaction(r: &RaceResult) -> Told {
    let level = r.isolation.map_or("", |i| i.name());
    let calls = match r.service_calls {
        1 => "once".to_string(),
        n => format!("{n} times"),
    };
    let mut t = Told::new();
    tell!(
        t,
        "Each request ran in one {} transaction. {} did the work, so the award service was \
         called {}",
        level,
        Counted(worked(r), "request"),
        calls
    );
    t.also(Fact::ServiceCalls(r.service_calls));
    let rolled = r.rolled_back();
    if rolled > 0 {
        tell!(
            t,
            "; {} met {} and rolled back, taking their XP rows with them, so {} stands. \
             A rollback takes back rows, never a call already made.",
            rolled.to_string(),
            error_codes(r),
            xp(r)
        );
    } else {
        tell!(t, ", and {} stands.", xp(r));
    }
    let retried: u32 = r.reports.iter().map(|w| w.retries).sum();
    if retried > 0 {
        tell!(
            t,
            " {} ran a request's transaction again after a serialization failure; a retry that finds \
             the key replays it, but the work its first try did stays done.",
            crate::race::told::counted(u64::from(retried), "retry")
        );
    }
    if r.reports.iter().any(|w| w.took(Step::Lock)) {
        let waited: f64 = r
            .reports
            .iter()
            .flat_map(|w| w.steps.iter().filter(|e| e.step == Step::Lock))
            .map(|e| e.end_ms - e.start_ms)
            .sum();
        tell!(
            t,
            " The advisory lock made the requests take turns; they waited {} ms for it in all, \
             each holding a pooled connection.",
            format!("{waited:.0}")
        );
    }
    t
}

/// The database errors the requests met, by their SQLSTATE names.
fn error_codes(r: &RaceResult) -> String {
    let mut codes: Vec<String> = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Error)
        .filter_map(|w| w.error.as_ref().map(|e| e.label()))
        .collect();
    codes.sort();
    codes.dedup();
    codes.join(" or ")
}

/// Lesson 5: the cache's `write(unless_exist)` has nothing to lock.
fn claims_in_the_cache(r: &RaceResult) -> Told {
    let racers = r
        .reports
        .iter()
        .filter(|w| !w.retry && w.took(Step::Work))
        .count();
    let mut t = Told::new();
    if racers > 1 {
        tell!(
            t,
            "write(unless_exist) found no entry to lock: {} each saw it missing, each \
             wrote it and was told it won, so each did the work.",
            Counted(Fact::Requests(racers, Who::FirstTryWorked), "worker")
        );
    } else if r.workers == 1 {
        t.push("One worker wrote the cache entry; no other raced it.");
    } else {
        t.push("One worker wrote the cache entry first; the others found it.");
    }
    t
}

/// The requests that lost the claim and did no work: they read the claim
/// (or waited for it) and answered 409 or replayed.
fn lost_claims(r: &RaceResult) -> usize {
    r.reports
        .iter()
        .filter(|w| !w.took(Step::Work) && (w.took(Step::Read) || w.waited.is_some()))
        .filter(|w| matches!(w.outcome, Outcome::Conflict | Outcome::Replayed))
        .count()
}

/// Lesson 2 and 3: one claim wins; what the losers did while they waited.
fn claim_work_complete(r: &RaceResult) -> Told {
    let losers = lost_claims(r);
    let mut t = Told::new();
    tell!(
        t,
        "The unique index let one claim in before any work ran; {} lost the claim and did no \
         work ({} answered 409, {} replayed the completed response).",
        Fact::Requests(losers, Who::LostClaim),
        ended(r, Outcome::Conflict),
        ended(r, Outcome::Replayed)
    );
    let held: f64 = r
        .reports
        .iter()
        .filter_map(|w| w.waited.filter(|w| w.held_connection))
        .map(|w| w.ms)
        .sum();
    if held >= 1.0 {
        tell!(
            t,
            " Blocked losers held pooled connections for {} ms in all while they waited.",
            format!("{held:.0}")
        );
    }
    let reads: u32 = r
        .reports
        .iter()
        .filter_map(|w| w.waited)
        .map(|w| w.reads)
        .sum();
    if reads > 0 {
        tell!(
            t,
            " Polling losers read the claim {} times, giving their connections back in between.",
            reads.to_string()
        );
    }
    t
}

/// Lesson 5: the client's retry after other cache writes.
fn after_the_retry(t: &mut Told, r: &RaceResult) {
    let Some(retry) = r
        .reports
        .iter()
        .find(|w| w.retry)
        .filter(|_| r.cache_pressure > 0)
    else {
        return;
    };
    let writes = Fact::Setting(Setting::CachePressure, r.cache_pressure);
    match (retry.took(Step::Work), r.store) {
        (true, _) => tell!(
            *t,
            " Then {} other cache writes evicted the completed entry, and the client's retry \
             (worker {}) found nothing and did the work again.",
            writes,
            Fact::Worker(retry.worker, Who::DidWork)
        ),
        (false, StoreKind::Cache) => tell!(
            *t,
            " Then {} other cache writes did not reach the entry, and the retry (worker {}) replayed it.",
            writes,
            Fact::Worker(retry.worker, Who::Ended(Outcome::Replayed))
        ),
        (false, _) => tell!(
            *t,
            " Then {} other cache writes went by, and the retry (worker {}) found the completed \
             claim in the key table, which nothing evicts, and replayed it.",
            writes,
            Fact::Worker(retry.worker, Who::Ended(Outcome::Replayed))
        ),
    }
}

/// Planned crashes that never struck, timeouts, 422s, wrong replays, errors.
fn what_else_happened(t: &mut Told, r: &RaceResult) {
    if let Some(plan) = r.crash
        && r.count(Outcome::Crashed) == 0
    {
        let who = plan
            .worker
            .map_or("any worker".to_string(), |w| format!("worker {w}"));
        tell!(
            *t,
            " The crash planned for {} {} never struck: it only strikes a request that does the work, \
             and {} did none. Leave out worker= to crash whichever request works.",
            who.clone(),
            crash_point(r, plan.at),
            who
        );
    }
    if r.count(Outcome::CheckoutTimeout) > 0 {
        tell!(
            *t,
            " {} gave up waiting for a connection",
            ended(r, Outcome::CheckoutTimeout)
        );
        let blocked = r
            .reports
            .iter()
            .filter(|w| w.waited.is_some_and(|w| w.held_connection))
            .count();
        if blocked > 0 {
            tell!(
                *t,
                ": the pool's connections were held by the winner and {} blocked losers.",
                Fact::Requests(blocked, Who::BlockedHolding)
            );
        } else {
            t.push(".");
        }
    }
    if r.count(Outcome::Mismatch) > 0 {
        tell!(
            *t,
            " {} sent the key with other parameters than the first request and got 422, with no work done.",
            ended(r, Outcome::Mismatch)
        );
    }
    if r.wrong_replays > 0 {
        tell!(
            *t,
            " {} got the first request's stored result although they asked for something else: \
             without a fingerprint the guard cannot tell.",
            Fact::Requests(r.wrong_replays as usize, Who::GotAnotherAnswer)
        );
    }
    let rolled = r.rolled_back();
    let errors = r.count(Outcome::Error).saturating_sub(rolled);
    if errors > 0 {
        // The errors a transaction's story told apart are said there.
        let share = match rolled {
            0 => ended(r, Outcome::Error),
            _ => Fact::Share(errors),
        };
        tell!(*t, " {} failed with a database error.", share);
    }
}

fn check_then_store(r: &RaceResult) -> Told {
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
        .filter(|w| w.outcome == Outcome::Replayed && !w.retry)
        .filter(|w| w.steps.first().is_some_and(|c| c.end_ms >= first_store))
        .collect();
    // Every request whose find saw no key did the work, a crashed one too.
    let worked = Counted(worked(r), "worker");
    let each = if worked.0.value() == 1 { "it" } else { "each" };
    let mut t = Told::new();
    // Finds on a lagging standby see the key late, whatever the pool.
    if let Some(standby) = r
        .standby
        .filter(|s| s.read_from == crate::race::ReadFrom::Standby)
    {
        tell!(
            t,
            "{} found no key, so {} did the work: their finds read a hot standby that \
             applies each commit {} ms after the primary, so a key the primary already had \
             was not there yet.",
            worked,
            each,
            standby.apply_delay_ms.to_string()
        );
    } else {
        tell!(
            t,
            "{} found no key before any was stored, so {} did the work",
            worked,
            each
        );
        if late.is_empty() {
            t.push(".");
        } else {
            let longest = late.iter().map(|w| w.checkout_wait_ms).fold(0.0, f64::max);
            tell!(
                t,
                "; {} waited up to {} ms for a connection (pool {}, {} for the workers), \
                 and by then the key existed.",
                Counted(Fact::Share(late.len() as u64), "worker"),
                format!("{longest:.1}"),
                pool(r),
                pool_for_workers(r)
            );
        }
    }
    looked_after_the_store(&mut t, r, late.len());
    if r.duplicates > 0 {
        tell!(
            t,
            " The unique index kept {} key row, but only after {} were already made.",
            Fact::KeyRows(r.key_rows),
            xp(r)
        );
    }
    t
}

/// Check-then-store's replays not explained by a wait for a connection
/// (`late` of them were): these simply looked after the first store had
/// committed.
fn looked_after_the_store(t: &mut Told, r: &RaceResult, late: usize) {
    let replayed = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Replayed && !w.retry)
        .count();
    let looked_late = replayed.saturating_sub(late);
    if looked_late > 0 {
        tell!(
            *t,
            " {} looked after the first key was stored, found it, and replayed its result.",
            Counted(Fact::Share(looked_late as u64), "worker")
        );
    }
    if late > 0 || looked_late > 0 {
        t.also(Fact::Requests(late + looked_late, Who::FirstTryReplayed));
    }
}

fn note(w: &WorkerReport, needle: &str) -> bool {
    w.steps.iter().any(|e| e.note.contains(needle))
}

fn guard(r: &RaceResult) -> Told {
    let mut t = Told::new();
    tell!(
        t,
        "The unique index let one claim in; the work and the completion committed together ({} created, {} \
         replayed, {} answered 409).",
        ended(r, Outcome::Created),
        ended(r, Outcome::Replayed),
        ended(r, Outcome::Conflict)
    );
    if let Some(w) = r.reports.iter().find(|w| w.outcome == Outcome::Crashed) {
        tell!(
            t,
            " Worker {} crashed and answered nothing; its transaction rolled back and its claim stayed pending.",
            Fact::Worker(w.worker, Who::Ended(Outcome::Crashed))
        );
    }
    takeovers(&mut t, r);
    // The retries that took nothing over: each one's answer.
    let others: Vec<&WorkerReport> = r
        .reports
        .iter()
        .filter(|w| w.retry && !note(w, "took over a stale claim"))
        .collect();
    let any_taker = r.reports.iter().any(|w| note(w, "took over a stale claim"));
    for (i, w) in others.iter().enumerate() {
        tell!(
            t,
            "{}worker {}) answered {} {}",
            match (i, any_taker) {
                (0, false) => " The retry (",
                (0, true) => " The other retry (",
                _ => "; the next (",
            },
            Fact::Worker(w.worker, Who::Retry),
            w.status.to_string(),
            w.outcome.name()
        );
    }
    if !others.is_empty() {
        t.push(".");
    }
    guard_failures(&mut t, r);
    t
}

/// Each stale claim taken over: by whom, from whom (as the taker's trace
/// says), and whether the taker then finished the work.
fn takeovers(t: &mut Told, r: &RaceResult) {
    let takers: Vec<&WorkerReport> = r
        .reports
        .iter()
        .filter(|w| note(w, "took over a stale claim"))
        .collect();
    if takers.is_empty() {
        return;
    }
    t.push(" Once a claim was older than the stale-claim age, another request took it over:");
    for (i, w) in takers.iter().enumerate() {
        let from = w
            .steps
            .iter()
            .find_map(|e| e.note.strip_prefix("took over a stale claim from "))
            .map_or("a stale".to_string(), |owner| format!("{owner}'s"));
        tell!(
            *t,
            "{} worker {} took {} claim",
            if i == 0 { "" } else { ";" },
            Fact::Worker(w.worker, Who::TookOver),
            from
        );
        if w.outcome == Outcome::Created {
            t.also(Fact::Worker(w.worker, Who::DidWork));
            t.push(" and finished the work");
        }
    }
    t.push(".");
    for w in r
        .reports
        .iter()
        .filter(|w| note(w, "claim lost to a takeover"))
    {
        tell!(
            *t,
            " Worker {} found its claim taken over when it came to complete, and rolled back its \
             XP row; its call to the award service was already made.",
            Fact::Worker(w.worker, Who::DidWork)
        );
    }
}

/// The guard's failed work and killed connections.
fn guard_failures(t: &mut Told, r: &RaceResult) {
    if let Some(w) = r
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::Failed && !w.retry)
    {
        let retry = r.reports.iter().find(|w| w.retry);
        tell!(
            *t,
            " Worker {}'s work failed; ",
            Fact::Worker(w.worker, Who::Ended(Outcome::Failed))
        );
        t.push(match (w.did.contains("released"), retry.map(|r| r.outcome)) {
            (false, Some(Outcome::Failed)) => "the guard stored the 500, and the retry got the same 500 replayed (Stripe's choice).",
            (true, Some(Outcome::Created)) => "the guard released the claim, and the retry ran the work again (Powertools' choice).",
            (false, _) => "the guard stored the 500.",
            (true, _) => "the guard released the claim.",
        });
    }
    if let Some(w) = r.reports.iter().find(|w| note(w, "connection killed")) {
        let resumed = note(w, "resumed own claim");
        tell!(
            *t,
            " Worker {}'s connection was killed mid-work; the transaction rolled back{}.",
            Fact::Worker(w.worker, Who::DidWork),
            if resumed {
                ", and it retried with the same key, resumed its own claim and completed it"
            } else {
                ""
            }
        );
    }
}

/// A client that hung up mid-request (lesson 9): what the app did with its
/// request, and what the client's retry got.
fn after_a_hang_up(t: &mut Told, r: &RaceResult) {
    let Some(plan) = r.hang_up else {
        return;
    };
    let Some(gone) = r
        .reports
        .iter()
        .find(|w| !w.retry && w.did.starts_with("hung up"))
    else {
        let who = plan
            .worker
            .map_or_else(|| "a worker".to_string(), |w| format!("worker {w}"));
        tell!(
            *t,
            " The hang-up planned for {} never struck: a client hangs up once its request's \
             work has begun, and {} was answered first.",
            who.clone(),
            who
        );
        return;
    };
    let app = match r.on_hangup {
        OnHangup::Cancel => {
            "the app dropped its request at its next await (--on-hangup cancel, as hyper does)"
        }
        OnHangup::Finish => {
            "the app ran its request to the end anyway (--on-hangup finish, as Puma and Node do)"
        }
    };
    tell!(
        *t,
        " Worker {}'s client hung up halfway through its work; {}; ",
        Fact::Worker(gone.worker, Who::Ended(Outcome::HungUp)),
        app
    );
    match r.reports.iter().find(|w| w.retry) {
        Some(retry) if retry.did.contains("stuck") => tell!(
            *t,
            "its retry (worker {}) was answered 409 until it gave up: the claim stays pending \
             for good, and the key is stuck.",
            Fact::Worker(retry.worker, Who::Ended(Outcome::Conflict))
        ),
        Some(retry) => tell!(
            *t,
            "its retry (worker {}) got {} {}.",
            Fact::Worker(retry.worker, Who::Retry),
            retry.status.to_string(),
            retry.outcome.name()
        ),
        None => t.push("it did not retry."),
    }
}

/// A crash point in words, for the strategy's own shape: which step the
/// request had done, and which not.
fn crash_point(r: &RaceResult, at: FaultPoint) -> &'static str {
    let stores = matches!(
        r.strategy.spec().story,
        Story::CheckThenStore | Story::NoKey | Story::IndexAtInsert
    );
    match (at, stores) {
        (FaultPoint::AfterClaim, true) => "after its find, before its work",
        (FaultPoint::AfterClaim, false) => "after its claim, before its work",
        (FaultPoint::DuringWork, _) => "halfway through its work",
        (FaultPoint::BeforeComplete, true) => "after its work, before it stored the key",
        (FaultPoint::BeforeComplete, false) => "after its work, before it completed its claim",
    }
}

/// For the shapes without recovery: what a crash left behind.
fn crash_consequence(t: &mut Told, r: &RaceResult) {
    let Some(crashed) = r.reports.iter().find(|w| w.outcome == Outcome::Crashed) else {
        return;
    };
    let point = match r.crash {
        Some(plan) => crash_point(r, plan.at).to_string(),
        // Crashed by a schedule's controller: its trace says before which step.
        None => crashed.saw.trim_start_matches("crashed ").to_string(),
    };
    tell!(
        *t,
        " Worker {} crashed {}, and answered nothing.",
        Fact::Worker(crashed.worker, Who::Ended(Outcome::Crashed)),
        point
    );
    let retried_409 = r
        .reports
        .iter()
        .any(|w| w.retry && w.outcome == Outcome::Conflict);
    match r.strategy.spec().story {
        Story::CheckThenStore if r.duplicates > 0 => t.push(
            " Its XP row stayed, but its key was never stored, so a later request found no key and did the work again.",
        ),
        Story::ClaimFirst if retried_409 => t.push(
            " Its claim stays pending for good: nothing may take it over, so every retry answers 409.",
        ),
        _ => {}
    }
    for retry in r.reports.iter().filter(|w| w.retry) {
        tell!(
            *t,
            " A client's retry (worker {}) got {} {}.",
            Fact::Worker(retry.worker, Who::Retry),
            retry.status.to_string(),
            retry.outcome.name()
        );
    }
}
