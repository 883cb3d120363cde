//! What a race with its claims in Redis did (`--store redis`), told from its own figures: who Redis said OK to, what its time to live let through, what the fencing token refused, and what the cache traffic evicted.

use crate::race::RaceResult;
use crate::race::told::{Counted, Fact, InRedis, Setting, Told, Who, tell};
use crate::request::{Outcome, Step};
use crate::strategy::redis_plan::{
    MaxmemoryPolicy, RedisClaim, RedisFigures, RedisRelease, ReplicaLink,
};

/// The whole story: the burst, then what the lease let through, then what
/// the fence and the traffic did.
pub fn claims_in_redis(r: &RaceResult) -> Told {
    let mut t = burst(r);
    let Some(redis) = r.redis else {
        return t;
    };
    replica(r, &redis, &mut t);
    lease(r, &redis, &mut t);
    release(r, &redis, &mut t);
    fence(r, &mut t);
    traffic(r, &redis, &mut t);
    t
}

/// The burst's claims: one `OK`, or one for each (a claim without NX).
fn burst(r: &RaceResult) -> Told {
    let worked = r
        .reports
        .iter()
        .filter(|w| !w.retry && w.took(Step::Work))
        .count();
    let mut t = Told::new();
    let overwrites = r
        .redis
        .is_some_and(|x| x.plan.claim == RedisClaim::Overwrite);
    if worked > 1 && overwrites {
        tell!(
            t,
            "Redis said OK to every claim, each set over the one before it, and {} did \
             the work.",
            Counted(Fact::Requests(worked, Who::FirstTryWorked), "worker")
        );
    } else if worked > 1 {
        tell!(
            t,
            "SET NX said OK to {}: it refuses a claim only while one is there, and each \
             time the one before was gone, its time to live run out, evicted or deleted, while its \
             owner still worked.",
            Counted(Fact::Requests(worked, Who::FirstTryWorked), "worker")
        );
    } else if r.workers == 1 {
        t.push("One worker set the claim in Redis; no other raced it.");
    } else {
        let losers = r.reports.iter().filter(|w| Who::LostClaim.is(w)).count();
        tell!(
            t,
            "SET NX let one claim in before any work ran: Redis said nothing to {}, \
             which did no work ({} answered 409, {} replayed the completed response).",
            Counted(Fact::Requests(losers, Who::LostClaim), "request"),
            Fact::Answered(Outcome::Conflict, r.count(Outcome::Conflict)),
            Fact::Answered(Outcome::Replayed, r.count(Outcome::Replayed))
        );
    }
    t
}

/// Retries that got the claim while the first owner still worked: the
/// time to live ran out (or other traffic evicted the claim).
fn lease(r: &RaceResult, redis: &RedisFigures, t: &mut Told) {
    let retried = r
        .reports
        .iter()
        .filter(|w| w.retry && w.took(Step::Work))
        .count();
    let ttl = Fact::Setting(Setting::RedisTtlMs, redis.plan.ttl_ms);
    let work = Fact::Setting(Setting::WorkMs, r.work_ms);
    let beat = redis
        .plan
        .heartbeat_ms
        .map(|ms| Fact::Setting(Setting::RedisHeartbeatMs, ms));
    if retried == 0 {
        if let Some(beat) = beat
            && redis.plan.ttl_ms < r.work_ms
        {
            tell!(
                *t,
                " Its owner renewed the claim every {} ms while it worked, so its {} ms time \
                 to live never ran out against {} ms of work.",
                beat,
                ttl,
                work
            );
        }
        return;
    }
    let who = Counted(Fact::Requests(retried, Who::Retry), "retry");
    if redis.plan.ttl_ms < r.work_ms {
        tell!(
            *t,
            " The claim's time to live was {} ms and the work took {} ms: Redis forgot the \
             claim while its owner still worked and said OK to {}, which worked again.",
            ttl,
            work,
            who
        );
        if let Some(beat) = beat {
            tell!(*t, " A heartbeat every {} ms came too late for it.", beat);
        }
    } else if redis.pressed.is_some_and(|p| !p.claim_kept)
        || redis.failed_over.is_some_and(|f| !f.claim_kept)
    {
        tell!(
            *t,
            " The claim was gone before its owner finished: Redis said OK to {}, which \
             worked again.",
            who
        );
    }
}

/// With `--redis-replica`: what `WAIT` heard, and what the failover kept.
fn replica(r: &RaceResult, redis: &RedisFigures, t: &mut Told) {
    let Some(link) = redis.plan.replica else {
        return;
    };
    if let Some(n) = redis.acknowledged {
        let heard = Fact::InRedis(InRedis::Acknowledged, n);
        let ms = Fact::Setting(Setting::RedisWaitMs, redis.plan.wait_ms.unwrap_or(0));
        tell!(
            *t,
            " Its owner sent WAIT 1 {} after the claim (wait for 1 replica, at most {} ms), \
             and {} of 1 acknowledged it",
            ms,
            ms,
            heard
        );
        let gave_up = r.reports.iter().filter(|w| Who::Unreplicated.is(w)).count();
        if gave_up > 0 {
            tell!(
                *t,
                ": the claim stood on the primary alone, so {} let it go and answered 409 \
                 without working. WAIT cannot take a write back; it only tells.",
                Counted(Fact::Requests(gave_up, Who::Unreplicated), "owner")
            );
        } else {
            t.push(", so the replica held the claim before its owner worked.");
        }
    }
    let Some(failover) = redis.failed_over else {
        return;
    };
    let stood = match link {
        ReplicaLink::InStep => "in step with it",
        ReplicaLink::Behind => "behind (its link cut before the run)",
    };
    tell!(
        *t,
        " Right after the claim the primary was killed and its replica promoted \
         (REPLICAOF NO ONE). The replica was {}, and {}.",
        stood,
        match failover.claim_kept {
            true => "the new primary held the claim",
            false => "the new primary had never heard of the claim",
        }
    );
}

/// With `--fail-work`: how the failed owner let its claim go.
fn release(r: &RaceResult, redis: &RedisFigures, t: &mut Told) {
    let failed = r
        .reports
        .iter()
        .find(|w| !w.retry && w.outcome == Outcome::Failed && w.took(Step::Complete));
    let Some(w) = failed else {
        return;
    };
    let kept = w
        .steps
        .iter()
        .any(|e| e.note.starts_with("nothing deleted"));
    let worker = Fact::Worker(w.worker, Who::Ended(Outcome::Failed));
    match (redis.plan.release, kept) {
        (RedisRelease::Del, _) => tell!(
            *t,
            " Worker {}'s work failed, and it let its claim go with a plain DEL: DEL deletes \
             the key whoever's claim it holds by then, and a claim that is not there lets \
             the next SET NX in.",
            worker
        ),
        (RedisRelease::OwnerChecked, true) => tell!(
            *t,
            " Worker {}'s work failed; its release deletes the key only while it holds its \
             own claim, and it held another's by then, so it was left.",
            worker
        ),
        (RedisRelease::OwnerChecked, false) => tell!(
            *t,
            " Worker {}'s work failed, and it deleted its own claim so that a retry may work.",
            worker
        ),
    }
}

/// With `--redis-fence`: the owners PostgreSQL refused.
fn fence(r: &RaceResult, t: &mut Told) {
    let refused = r.reports.iter().filter(|w| Who::FencedOut.is(w)).count();
    if refused == 0 {
        return;
    }
    tell!(
        *t,
        " The fencing token told the owners apart: {} came to write after PostgreSQL had \
         seen a newer token, and it took none of their rows ({} in the end). Their service \
         calls were made all the same ({} in all): a token fences what the store checks, \
         not the world.",
        Counted(Fact::Requests(refused, Who::FencedOut), "owner"),
        Counted(Fact::XpRows(r.xp_rows), "XP row"),
        Counted(Fact::ServiceCalls(r.service_calls), "service call")
    );
}

/// With `--redis-pressure`: what the other keys did to the claim.
fn traffic(r: &RaceResult, redis: &RedisFigures, t: &mut Told) {
    let Some(seen) = redis.pressed else {
        if redis.plan.pressure > 0 {
            t.push(" No claim was held for the other traffic to press on: it did not run.");
        }
        return;
    };
    tell!(
        *t,
        " While the owner worked, other traffic wrote {} of 1 KiB into the 1 MiB \
         Redis had room for ({}):",
        Counted(Fact::InRedis(InRedis::Written, seen.written), "key"),
        redis.plan.eviction.name()
    );
    if seen.refused > 0 {
        tell!(
            *t,
            " Redis refused {} for want of memory",
            Counted(Fact::InRedis(InRedis::Refused, seen.refused), "write")
        );
    } else {
        t.push(" Redis took every write");
    }
    tell!(
        *t,
        " and evicted {}, {}.",
        Counted(Fact::InRedis(InRedis::Evicted, seen.evicted), "key"),
        match (seen.claim_kept, redis.plan.eviction) {
            (false, MaxmemoryPolicy::VolatileLru) => {
                "the claim among them: volatile-lru evicts only keys with a time to live, and \
                 a claim always has one"
            }
            (false, _) => "the claim among them",
            (true, _) => "but kept the claim",
        }
    );
    if r.count(Outcome::Duplicate) > 0 && !seen.claim_kept {
        t.push(" A claim in a cache that evicts is a claim that can vanish.");
    }
}
