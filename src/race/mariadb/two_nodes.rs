//! Two requests on two nodes of a cluster, stepped: two claims made before either works, and a retry on a node held behind (see [`super::behind`]), as lesson 11's exercise judges them.

use anyhow::{Result, bail};

use super::behind::{Held, caught_up, held_while, hold, not_behind, release};
use super::{EngineResult, MariadbRace, run_stepped};
use crate::db::mariadb::Mariadb;
use crate::race::stepper::{Controller, Standing};
use crate::request::Step;

/// A retry on a node behind, and the race it was.
pub struct Behind {
    pub result: EngineResult,
    pub held: Held,
}

/// Request 1 on node 1 claims; once node 2 has the claim, node 2 is held;
/// request 1 works and completes; then request 2 (the retry, on node 2)
/// runs with node 2 still behind by the completion.
pub async fn retry_on_a_node_behind(db: &Mariadb, race: &MariadbRace) -> Result<Behind> {
    if db.nodes() < 2 || race.workers != 2 {
        bail!("a retry on a node behind needs a cluster and two requests");
    }
    let mut held = Held::NotMade("the first request did not get as far as its work".into());
    let result = run_stepped(db, race, async |c: &mut Controller| {
        held = drive(db, c).await?;
        Ok(())
    })
    .await?;
    Ok(Behind { result, held })
}

/// Request 1 (on node 1) moves until it is about to work, then request 2
/// (on node 2) the same, then both run to the end: two claims made before
/// either request works, whatever each node has applied by then.
pub async fn two_claims_first(db: &Mariadb, race: &MariadbRace) -> Result<EngineResult> {
    if db.nodes() < 2 || race.workers != 2 {
        bail!("two claims on two nodes need a cluster and two requests");
    }
    run_stepped(db, race, async |c: &mut Controller| {
        c.settle_all().await;
        for worker in [1, 2] {
            move_until(c, worker, |s| *s == Standing::Before(Step::Work)).await?;
        }
        Ok(())
    })
    .await
}

/// The moves and the hold, in order; the retry runs free at the end.
async fn drive(db: &Mariadb, c: &mut Controller) -> Result<Held> {
    c.settle_all().await;
    if !move_until(c, 1, |s| *s == Standing::Before(Step::Work)).await? {
        return Ok(Held::NotMade(
            "the first request did not win its claim".into(),
        ));
    }
    let mut node2 = db.node_admin(2).await?;
    caught_up(db, &mut node2).await?;
    c.let_nodes_lag();
    let mut node2 = hold(node2).await?;
    move_until(c, 1, |s| *s == Standing::Finished).await?;
    if let Some(not_behind) = not_behind(db, &mut node2).await? {
        release(&mut node2).await?;
        return Ok(not_behind);
    }
    let ((), held) = held_while(node2, &db.database, c.run_free()).await?;
    Ok(held)
}

/// Moves `worker` one step at a time until its standing passes `done`, or
/// it finishes; whether `done` was reached.
async fn move_until(
    c: &mut Controller,
    worker: usize,
    done: impl Fn(&Standing) -> bool,
) -> Result<bool> {
    for _ in 0..12 {
        let now = c.standing.get(&worker).cloned();
        match now {
            Some(ref s) if done(s) => return Ok(true),
            Some(Standing::Finished) | None => return Ok(false),
            _ => {}
        }
        c.advance(worker)
            .await
            .map_err(|why| anyhow::anyhow!("{why}"))?;
    }
    Ok(false)
}
