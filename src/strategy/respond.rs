//! One request from its first checkout to its answer: what a race's worker and the HTTP app's handler both run.

use deadpool_postgres::PoolError;

use super::{Step, Strategy};
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace};

/// Checks a connection out, lets `strategy` handle `req`, gives the
/// connection back (or throws it away after a planned crash), and turns
/// whatever went wrong into the answer a client would get.
pub async fn respond(
    strategy: &dyn Strategy,
    lease: &mut Lease,
    req: &Request,
    trace: &mut Trace,
) -> Answer {
    let handled = match lease.conn(trace).await {
        Ok(_) => strategy.handle(lease, req, trace).await,
        Err(failure) => Err(failure),
    };
    if let Err(Failure::Db(err)) = &handled {
        trace.caught(err);
    }
    if trace.crashed() {
        lease.discard();
    } else {
        lease.release();
    }
    match handled {
        // A crashed worker answers nothing, whatever its code went on to do.
        _ if trace.crashed() => Answer {
            replayed: false,
            outcome: Outcome::Crashed,
            saw: trace
                .events
                .iter()
                .find(|e| e.step == Step::Fault)
                .map_or(String::new(), |e| e.note.clone()),
            did: "crashed; no answer".into(),
            made_xp: None,
            body: None,
            waited: None,
        },
        Ok(answer) => answer,
        Err(Failure::Checkout(PoolError::Timeout(_))) => {
            trace.note("timed out");
            Answer {
                replayed: false,
                outcome: Outcome::CheckoutTimeout,
                saw: "no free connection".into(),
                did: format!("gave up after {} ms", lease.wait().as_millis()),
                made_xp: None,
                body: None,
                waited: None,
            }
        }
        Err(failure) => Answer {
            replayed: false,
            outcome: Outcome::Error,
            saw: match failure {
                Failure::Overran(_) => "a step past its limit".into(),
                Failure::Store(_) => "the claim store failed".into(),
                _ => "database error".into(),
            },
            did: failure.to_string(),
            made_xp: None,
            body: None,
            waited: None,
        },
    }
}
