//! Two requests on two nodes of a cluster, stepped: two claims made before either works, a claim refused at its COMMIT, and a retry on a node held behind (see [`super::behind`]), as lesson 11's exercise judges them.

use anyhow::{Result, bail};

use super::behind::{Held, caught_up, committed_on_node_1, held_while, hold, not_behind, release};
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

/// Node 2 is held (its applier paused) once it has applied everything;
/// request 1 claims on node 1; then both run free. Request 2's claim on
/// node 2 cannot see request 1's, which node 2 has not applied: made
/// there, it reaches certification after request 1's and is refused at
/// its COMMIT (1213), the node let go once it has waited there. A claim
/// that commits with the request's work is refused only after that work.
pub async fn a_claim_refused_at_commit(db: &Mariadb, race: &MariadbRace) -> Result<Behind> {
    if db.nodes() < 2 || race.workers != 2 {
        bail!("a claim refused at its COMMIT needs a cluster and two requests");
    }
    let mut held = Held::NotMade("the first request did not get as far as its work".into());
    let result = run_stepped(db, race, async |c: &mut Controller| {
        c.settle_all().await;
        // Request 2 has its connection first: a causal session's first
        // read would wait on the held node before the claim is made.
        move_until(c, 2, |s| *s == Standing::Before(Step::Claim)).await?;
        let mut node2 = db.node_admin(2).await?;
        caught_up(db, &mut node2).await?;
        c.let_nodes_lag();
        let mut node2 = hold(node2).await?;
        let before = committed_on_node_1(db).await?;
        if !move_until(c, 1, |s| *s == Standing::Before(Step::Work)).await? {
            release(&mut node2).await?;
            held = Held::NotMade("the first request did not win its claim".into());
            return Ok(());
        }
        // A claim in the request's transaction has not committed yet: node
        // 2 has nothing to be behind on, and the case goes on.
        if committed_on_node_1(db).await? > before
            && let Some(not_behind) = not_behind(db, &mut node2).await?
        {
            release(&mut node2).await?;
            held = not_behind;
            return Ok(());
        }
        held = held_while(node2, &db.database, c.run_free()).await?.1;
        Ok(())
    })
    .await?;
    Ok(Behind { result, held })
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
