//! The exercises judged on MariaDB (InnoDB): a guard file that says `engine = "mariadb"`, raced and explored on a disposable MariaDB by the same cases as on PostgreSQL.

use std::path::Path;

use anyhow::Result;

use super::cases::{Case, base, held_in_a_race, held_once, rows_calls_statuses as said};
use crate::db::mariadb::Mariadb;

use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::Outcome;
use crate::race::mariadb::{self, EngineResult, MariadbRace};
use crate::race::options::RaceInput;

/// Races each case once on MariaDB, on fresh tables, and judges it.
pub async fn races(db: &Mariadb, cases: Vec<Case<EngineResult>>) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for (input, verdict) in cases {
        let r = mariadb::run(db, &MariadbRace::from_input(&input, Origin::Flags)?, 1).await?;
        checks.push(verdict(&r));
    }
    Ok(checks)
}

/// The cluster's settings for exercise 11's cases: `workers` requests
/// spread over three primaries in turn.
fn on_three_primaries(file: &Path, workers: u64) -> RaceInput {
    base(file).with(|r| {
        r.shape.workers = Some(workers);
        r.cluster.nodes = Some(3);
    })
}

/// How many runs of the burst must each hold: one that claims inside
/// its transaction works on two nodes in most runs, not in all.
const BURST_RUNS: usize = 3;

/// Exercise 11 on a Galera cluster of three nodes: a burst spread over
/// them (in each of [`BURST_RUNS`] runs), two claims on two nodes before
/// either works, a claim refused at its COMMIT, and a retry on a node
/// that is behind.
pub async fn more_than_one_primary(db: &Mariadb, file: &Path) -> Result<Vec<Check>> {
    let burst = MariadbRace::from_input(&on_three_primaries(file, 5), Origin::Flags)?;
    let mut last = None;
    for run in 1..=BURST_RUNS {
        let r = mariadb::run(db, &burst, run).await?;
        let failed = !held_once(&r);
        last = Some(r);
        if failed {
            break;
        }
    }
    let r = last.expect("at least one run");
    let requests = r.reports.iter().map(|w| &w.steps[..]).collect();
    let saw = format!("run {}: {}", r.run, said(&r));
    let mut checks = vec![held_in_a_race(
        requests,
        (
            "five at once, over three primaries",
            "1 XP row and 1 service call, the losers told 409 or the stored response, in 3 runs",
        ),
        held_once(&r),
        saw,
    )];
    let pair = MariadbRace::stepped_from_input(&on_three_primaries(file, 2))?;
    let r = mariadb::two_nodes::two_claims_first(db, &pair).await?;
    checks.push(Check::judged(
        "two claims on two nodes, then the work",
        "both requests claim before either works: still 1 XP row and 1 service call",
        held_once(&r),
        said(&r),
    ));
    checks.push(refused_at_commit(db, &pair).await?);
    checks.push(retry_behind(db, &pair).await?);
    Ok(checks)
}

/// Request 2's claim on node 2, made while node 2 has not applied request
/// 1's: certification refuses it at its COMMIT (1213). It must not work,
/// nor be told 500. A file that held without any request meeting the
/// refusal was not judged on it, and the case says so.
async fn refused_at_commit(db: &Mariadb, pair: &MariadbRace) -> Result<Check> {
    use crate::race::mariadb::behind::Held;
    let (case, demands) = (
        "a claim refused at its COMMIT",
        "request 2 claims on node 2 before node 2 applied request 1's claim, and is refused \
         at its COMMIT (1213): still 1 XP row and 1 service call, and request 2 told 409 or \
         the stored response, not 500",
    );
    let b = mariadb::two_nodes::a_claim_refused_at_commit(db, pair).await?;
    if let Held::NotMade(why) = &b.held {
        return Ok(Check::not_applicable(case, demands, why.clone()));
    }
    let refused = b
        .result
        .reports
        .iter()
        .any(|w| w.error.as_ref().is_some_and(|e| e.number == 1213));
    let passed = held_once(&b.result);
    if passed && !refused {
        let why = format!("no request's COMMIT was refused; {}", said(&b.result));
        return Ok(Check::not_applicable(case, demands, why));
    }
    let second = b.result.reports.iter().find(|w| w.worker == 2);
    let told = second.map_or(String::new(), |w| format!("request 2: {}; ", w.did));
    Ok(Check::judged(
        case,
        demands,
        passed,
        format!("{told}{}", said(&b.result)),
    ))
}

/// The retry on node 2 while node 2 has not applied the first request's
/// completion: it must answer with the stored response, and work never.
async fn retry_behind(db: &Mariadb, pair: &MariadbRace) -> Result<Check> {
    use crate::race::mariadb::behind::Held;
    use crate::race::mariadb::two_nodes;
    let (case, demands) = (
        "a retry on a node that is behind",
        "request 1 completes on node 1; its retry on node 2, before node 2 applied the \
         completion, is answered with the stored response",
    );
    let b = two_nodes::retry_on_a_node_behind(db, pair).await?;
    let retry = b.result.reports.iter().find(|w| w.worker == 2);
    let outcome = retry.map(|w| w.outcome);
    let passed = held_once(&b.result) && outcome == Some(Outcome::Replayed);
    let waited = match &b.held {
        Held::NotMade(why) => return Ok(Check::not_applicable(case, demands, why.clone())),
        Held::Waited => "the retry waited for node 2",
        Held::Answered => "the retry answered from node 2 as it was",
    };
    let told = match retry {
        Some(w) => format!("; the retry: {}", w.did),
        None => String::new(),
    };
    Ok(Check::judged(
        case,
        demands,
        passed,
        format!("{waited}{told}; {}", said(&b.result)),
    ))
}
