//! Every sentence agrees with its figure: a race's narrative is made of
//! facts (each number and worker it names, with what it claims), and the
//! facts are read off the race a second time before the sentence shows.
//! Debug builds stop on a disagreement, so every race the suite prints is
//! checked; these tests show that the check bites.

use idem::db::{ConnectOptions, Database};
use idem::race::CrashPlan;
use idem::race::fault::FaultPoint;
use idem::race::options::RaceInput;
use idem::race::told::{Fact, Who};
use idem::report::explain;
use idem::strategy::StrategyKind;

use crate::common::Built;
use crate::common::races::races;

/// Lesson 7's check-then-store crash: the crashed request found no key and
/// worked too, so a sentence that counts only the requests that answered
/// with their XP row ("1 worker found no key") is caught, and so is a
/// worker named for what another did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_the_race_does_not_bear_out_is_caught() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let settings = RaceInput::default()
        .with(|r| {
            r.strategy.strategy = Some(StrategyKind::CheckThenStore);
            r.app.pool_size = Some(2);
            r.faults.crash = Some(CrashPlan {
                worker: None,
                at: FaultPoint::BeforeComplete,
            });
        })
        .built();
    let results = races(&db, settings, 1).await;
    db.close().await.unwrap();
    let r = &results[0];
    let told = explain::told(r);
    assert!(told.disagreements(r).is_empty(), "{told:?}");
    let crashed = r
        .reports
        .iter()
        .find(|w| w.outcome == idem::race::Outcome::Crashed)
        .expect("the planned crash struck");
    let worked = r
        .reports
        .iter()
        .filter(|w| w.steps.iter().any(|e| e.step == idem::request::Step::Work))
        .count();
    assert!(worked >= 2, "the crashed request and another worked");
    let answered_with_xp = r.reports.iter().filter(|w| w.made_xp.is_some()).count();
    let wrong = [
        Fact::XpRows(r.xp_rows + 1),
        Fact::Requests(answered_with_xp.min(worked - 1), Who::DidWork),
        Fact::Worker(crashed.worker, Who::Ended(idem::race::Outcome::Replayed)),
        Fact::Worker(r.reports.len() + 1, Who::Retry),
        Fact::ServiceCalls(r.service_calls + 1),
    ];
    for fact in wrong {
        let mut told = explain::told(r);
        told.also(fact);
        let found = told.disagreements(r);
        assert_eq!(found.len(), 1, "{fact:?} is caught: {found:?}");
    }
}
