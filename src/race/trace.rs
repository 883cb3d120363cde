//! The timeline of one request: which step ran when, in milliseconds from the start gate.

use std::future::Future;
use std::time::Instant;

use serde::Serialize;

use crate::strategy::Step;

/// One step one worker took.
#[derive(Debug, Clone, Serialize)]
pub struct StepEvent {
    pub step: Step,
    /// Milliseconds from the start gate to the step's start and end.
    pub start_ms: f64,
    pub end_ms: f64,
    /// What the step found or did, in a few words.
    pub note: String,
}

/// Records the steps of one request.
#[derive(Debug)]
pub struct Trace {
    gate: Instant,
    pub events: Vec<StepEvent>,
    /// Statements sent to the database.
    pub queries: u32,
    /// The server process of the request's connection, where a strategy
    /// asked for it (to tell who blocks whom).
    pub backend_pid: Option<i32>,
}

impl Trace {
    /// A trace whose clock starts at the moment the gate opened.
    pub fn new(gate: Instant) -> Self {
        Self {
            gate,
            events: Vec::new(),
            queries: 0,
            backend_pid: None,
        }
    }

    /// Runs `step` and records when it started and ended.
    pub async fn time<T>(&mut self, step: Step, fut: impl Future<Output = T>) -> T {
        let start = self.since_gate();
        let out = fut.await;
        let end = self.since_gate();
        self.events.push(StepEvent {
            step,
            start_ms: start,
            end_ms: end,
            note: String::new(),
        });
        out
    }

    /// Runs `step`, one statement sent to the database, and records it.
    pub async fn query<T>(&mut self, step: Step, fut: impl Future<Output = T>) -> T {
        self.queries += 1;
        self.time(step, fut).await
    }

    /// Milliseconds from the gate to now.
    pub fn now_ms(&self) -> f64 {
        self.since_gate()
    }

    /// Notes what the last step found or did.
    pub fn note(&mut self, note: impl Into<String>) {
        if let Some(last) = self.events.last_mut() {
            last.note = note.into();
        }
    }

    /// When the last `step` ended, if the request took it.
    pub fn ended(&self, step: Step) -> Option<f64> {
        self.events
            .iter()
            .rev()
            .find(|e| e.step == step)
            .map(|e| e.end_ms)
    }

    fn since_gate(&self) -> f64 {
        self.gate.elapsed().as_secs_f64() * 1000.0
    }
}
