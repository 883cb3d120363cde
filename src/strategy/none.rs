//! `none`: the work with no key at all, the baseline every guard is measured against.

use super::spec::{Can, Figure, Keys, OnMariadb, Spec, Story, TransactionRule};
use super::{Handled, Step, Strategy, work};
use crate::request::mariadb::Answered;
use crate::request::{Answer, Lease, Outcome, Request, Trace};

/// No guard: every request does the work.
pub struct NoGuard;

impl Strategy for NoGuard {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let conn = lease.conn(trace).await?;
            let xp = trace
                .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
                .await?;
            trace.note(format!("made XP #{xp}"));
            Ok(Answer {
                replayed: false,
                outcome: Outcome::Created,
                saw: "no guard".into(),
                did: format!("made XP #{xp}"),
                made_xp: Some(xp),
                body: Some(work::response_body(xp, &req.params)),
                waited: None,
            })
        })
    }
}

/// `none`: the baseline.
pub const SPEC: Spec = Spec {
    name: "none",
    help: "The work with no key at all",
    lesson: 1,
    in_course: true,
    keys: Keys::Nowhere,
    transaction: TransactionRule::Refused("none has no key for a transaction to protect"),
    losers: false,
    figure: Figure::EveryWorker,
    story: Story::NoKey,
    rails: &[],
    matrix: &[],
    can: Can::NOTHING,
    build: |_| Box::new(NoGuard),
    on_mariadb: OnMariadb::Runs(|ctx| {
        Box::pin(async move {
            match ctx.work().await {
                Ok(xp) => Answered {
                    made_xp: Some(xp),
                    ..Answered::new(Outcome::Created, "no key at all", format!("made XP #{xp}"))
                },
                Err(err) => ctx.failed(&err, "no key at all", None),
            }
        })
    }),
};
