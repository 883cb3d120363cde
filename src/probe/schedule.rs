//! `idem probe --retry-at LIST`: the request, then the same request again at each offset from its send, each on a connection of its own, judged by the effects left for the key.
//!
//! A burst finds the race at the start of a request's life; a schedule finds
//! what comes later: a claim whose time to live is shorter than the work
//! lets a retry take it over while its owner still works, and the work runs
//! twice.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tokio::time::Instant;

use super::{Effects, Probe, Shot};

/// One retry of the schedule, as it was answered.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// When it was sent, from the first send, in ms.
    pub offset_ms: u64,
    /// `None` when no answer came.
    pub status: Option<u16>,
    /// The answer carried `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// Whether its body is the first request's, byte for byte (`None`
    /// when either got no answer).
    pub same_body: Option<bool>,
    /// The effects for the key once it was answered (with --count-sql).
    pub effects_so_far: Option<i64>,
    /// Why no answer came.
    pub error: Option<String>,
}

/// A whole schedule: the first request (or burst) and every retry.
#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    /// Marks this line of `--json` as a schedule.
    pub schedule: bool,
    pub key: String,
    /// The first send: how many requests went at once, and what each got.
    pub requests: usize,
    pub first_statuses: Vec<Option<u16>>,
    pub steps: Vec<Step>,
    /// The effects for the key at the end (with --count-sql).
    pub effects: Option<i64>,
    /// One effect: held; more: a duplicate; `None` when not counted, or no effect.
    pub held: Option<bool>,
}

/// Sends the first request (`n` at once when `n > 1`) and a retry at each
/// of `offsets` from it, each retry on a fresh connection, counting the
/// effects after each answer.
pub async fn run(probe: &Probe, key: &str, n: usize, offsets: &[Duration]) -> Result<Schedule> {
    let before = probe.count().await?;
    let start = Instant::now();
    let first = async {
        match n {
            1 => vec![probe.once(Some(key), &probe.body).await],
            n => probe.volley(Some(key), &probe.body, n).await.shots,
        }
    };
    let retries = join_all(
        offsets
            .iter()
            .map(|offset| async move {
                tokio::time::sleep_until(start + *offset).await;
                let shot = probe.once(Some(key), &probe.body).await;
                let counted = match before {
                    Some(before) => Some(probe.count().await?.map(|now| (before, now))),
                    None => None,
                };
                anyhow::Ok((*offset, shot, counted.flatten()))
            })
            .collect(),
    );
    let (first, retries) = tokio::join!(first, retries);
    let first_body = first.iter().find(|s| s.succeeded()).map(|s| s.body.clone());
    let mut steps = Vec::with_capacity(retries.len());
    for retry in retries {
        let (offset, shot, counted) = retry?;
        steps.push(step(offset, &shot, first_body.as_ref(), counted)?);
    }
    let effects = match before.zip(probe.count().await?) {
        Some((b, a)) => Some(Effects::between(b, a)?.effects),
        None => None,
    };
    Ok(Schedule {
        schedule: true,
        key: key.to_owned(),
        requests: n,
        first_statuses: first.iter().map(|s| s.status).collect(),
        steps,
        effects,
        held: effects.filter(|e| *e > 0).map(|e| e == 1),
    })
}

/// Runs every future together; their outputs in the order given.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(done) => *output = Some(done),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// One retry's row: its answer beside the first's, and the effects then.
fn step(
    offset: Duration,
    shot: &Shot,
    first_body: Option<&bytes::Bytes>,
    counted: Option<(i64, i64)>,
) -> Result<Step> {
    let effects_so_far = match counted {
        Some((before, now)) => Some(Effects::between(before, now)?.effects),
        None => None,
    };
    Ok(Step {
        offset_ms: offset.as_millis() as u64,
        status: shot.status,
        replayed: shot.replayed,
        same_body: first_body
            .filter(|_| shot.status.is_some())
            .map(|body| *body == shot.body),
        effects_so_far,
        error: shot.error.clone(),
    })
}
