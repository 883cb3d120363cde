//! The guard in idem's races: the library's algorithm on a pooled connection, watched by the trace, with retries.

use super::core;
use super::heartbeat::Heartbeat;
use super::settings::Guard;
use super::verdict::{ClaimState, Reply, Verdict, WorkFailed};
use std::sync::Arc;

use crate::db::aside::Aside;
use crate::db::pool::Conn;
use crate::db::pool::Workers;
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace};
use crate::strategy::answers::{self, mismatch};
use crate::strategy::claims::key_of;
use crate::strategy::spec::{
    Can, Figure, Keys, MatrixCell, OnMariadb, Spec, Story, TransactionRule,
};
use crate::strategy::{Handled, OPERATION, Starting, Strategy, work};

/// `guard`: lesson 7's whole guard, as idem races it.
pub const SPEC: Spec = Spec {
    name: "guard",
    help: "The whole guard: claim-work-complete with stale-claim takeover, \
        rescue of failed work and retry of transient failures (lesson 7)",
    lesson: 7,
    in_course: true,
    keys: Keys::KeyTable,
    transaction: TransactionRule::Refused(
        "the guard commits its claim before the work on purpose (lesson 7); \
         one transaction would hide the claim until the end",
    ),
    losers: false,
    figure: Figure::One,
    story: Story::Guard,
    rails: &[],
    matrix: &[MatrixCell::Plain],
    can: Can {
        rescue: true,
        heartbeat: true,
        ..Can::NOTHING
    },
    on_mariadb: OnMariadb::Runs(super::on_mariadb::shape),
    build: |options| {
        Box::new(Guard {
            stale_after: options.recovery.stale_after(),
            on_failure: options.recovery.on_failure(),
            heartbeat: options.recovery.heartbeat().map(Heartbeat::every),
            ..Guard::default()
        })
    },
};

/// Starts `heartbeat`'s beats on a connection set aside from the pool's,
/// opened again whenever it is lost, and said so.
pub(crate) async fn beat_aside(heartbeat: &Heartbeat, workers: &Workers) -> anyhow::Result<()> {
    let aside = Arc::new(Aside::new(workers.clone(), "the heartbeat"));
    heartbeat
        .start(move || {
            let aside = aside.clone();
            async move { aside.open().await }
        })
        .await
}

impl Strategy for Guard {
    /// The heartbeat's connection, set aside from the pool's.
    fn start<'a>(&'a self, workers: &'a Workers) -> Starting<'a> {
        Box::pin(async move {
            if let Some(heartbeat) = &self.heartbeat {
                beat_aside(heartbeat, workers).await?;
            }
            Ok(())
        })
    }

    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let mut backoff = self.first_backoff;
            let mut retries = 0;
            loop {
                match self.attempt(lease, req, trace).await {
                    // A crashed worker retries nothing: it is gone.
                    Err(_) if trace.crashed() => return Err(Failure::Crashed),
                    Err(failure) if failure.is_transient() && retries < self.max_retries => {
                        // The same key again, on a fresh connection.
                        retries += 1;
                        lease.discard();
                        trace.note(format!("transient failure, retry {retries}: {failure}"));
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                    other => return other,
                }
            }
        })
    }
}

impl Guard {
    /// One attempt on the leased connection, answered as the race shows it.
    async fn attempt(
        &self,
        lease: &mut Lease,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Answer, Failure> {
        let client: &Conn = lease.conn(trace).await?;
        let key = key_of(req, OPERATION);
        // The award, run by the guard inside the transaction that completes the claim.
        let award = |client| async move {
            if req.work_fails {
                work::service_call(req).await;
                return Err(WorkFailed::Service("the award service failed".into()));
            }
            let xp = work::award_xp(client, req)
                .await
                .map_err(WorkFailed::Database)?;
            Ok(Reply {
                status: 201,
                body: work::response_body(xp, &req.params),
            })
        };
        let verdict = core::attempt(self, client, &key, award, trace).await?;
        Ok(answer(req, verdict))
    }
}

/// The verdict as the client sees it, with what the worker saw and did.
fn answer(req: &Request, verdict: Verdict) -> Answer {
    match verdict {
        Verdict::Done(reply) => {
            let xp = work::xp_id_of(&reply.body);
            Answer {
                replayed: false,
                outcome: Outcome::Created,
                saw: "claim won".into(),
                did: format!("made XP #{}, completed", xp.unwrap_or_default()),
                made_xp: xp,
                body: Some(reply.body),
                waited: None,
            }
        }
        Verdict::Replay(reply) if reply.status == 500 => Answer {
            replayed: true,
            outcome: Outcome::Failed,
            saw: "claim completed with 500".into(),
            did: "replayed the stored 500".into(),
            made_xp: None,
            body: Some(reply.body),
            waited: None,
        },
        Verdict::Replay(reply) => answers::replay(Some(reply.body), "claim completed", None),
        Verdict::InFlight { why } => {
            let did = match why {
                ClaimState::TakenOver => "rolled back its work, 409",
                _ => "answered 409",
            };
            answers::conflict(req, why.as_str(), did, None)
        }
        Verdict::Reused => mismatch(req),
        Verdict::Failed { reply, released } => Answer {
            replayed: false,
            outcome: Outcome::Failed,
            saw: "claim won".into(),
            did: if released {
                "work failed, released the claim".into()
            } else {
                "work failed, stored the 500".into()
            },
            made_xp: None,
            body: Some(reply.body),
            waited: None,
        },
    }
}
