//! The timeline of one request: which step ran when, in milliseconds from the start gate.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::fault::{Fault, FaultKind};
use super::hook::Go;
use super::{DbError, Step, StepHook};

/// One step one worker took.
#[derive(Debug, Clone, Serialize)]
pub struct StepEvent {
    pub step: Step,
    /// Milliseconds from the start gate to the step's start and end.
    pub start_ms: f64,
    pub end_ms: f64,
    /// What the step found or did, in a few words.
    pub note: String,
    /// The statement the step sent, if it sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sql: Option<&'static str>,
}

/// Records the steps of one request.
#[derive(Debug)]
pub struct Trace {
    gate: Instant,
    pub(crate) events: Vec<StepEvent>,
    /// Statements sent to the database.
    pub(crate) queries: u32,
    /// The server process of the request's connection, where a strategy
    /// asked for it (to tell who blocks whom), or where a fault needs it.
    pub(crate) backend_pid: Option<i32>,
    /// A fault planned for this request, if any.
    pub(crate) fault: Option<Arc<Fault>>,
    /// Set once a fault has fired: what it did to the request.
    pub(crate) faulted: Option<FaultKind>,
    /// The request's handle on the award service, silenced by a crash.
    pub(crate) service: Option<super::service::ServiceCalls>,
    /// How far into a step a fault planned "during" it strikes.
    pub(crate) strike_delay: Duration,
    /// Step by step (`idem step`): the worker's end of the controller.
    pub(crate) stepper: Option<StepHook>,
    /// The last database error the request met, caught or not.
    pub(crate) db_error: Option<DbError>,
    /// Told when the work begins, with the request's worker: a client
    /// that is to hang up mid-request (`race --http --hang-up`).
    pub(crate) hang_up: Option<(Arc<super::hang_up::HangUps>, usize)>,
    /// How many times the request's transaction was run again after a
    /// serialization failure (`--retry-serialization`).
    pub(crate) retries: u32,
    /// Whether steps are timed and recorded; a counting trace only counts
    /// the statements.
    timed: bool,
}

impl Trace {
    /// A trace whose clock starts at the moment the gate opened.
    pub fn new(gate: Instant) -> Self {
        Self {
            gate,
            events: Vec::new(),
            queries: 0,
            backend_pid: None,
            fault: None,
            faulted: None,
            service: None,
            strike_delay: Duration::ZERO,
            stepper: None,
            db_error: None,
            hang_up: None,
            retries: 0,
            timed: true,
        }
    }

    /// A trace that only counts statements: no clock read, no step kept.
    /// The benchmark's loop wants the strategy's cost, not its watcher's
    /// (the clock is read twice a step, and a read costs about 0.2 µs on a
    /// virtual machine).
    pub fn counting() -> Self {
        Self {
            timed: false,
            ..Self::new(Instant::now())
        }
    }

    /// Runs `step` and records when it started and ended.
    pub async fn time<T>(&mut self, step: Step, fut: impl Future<Output = T>) -> T {
        self.time_sql(step, None, fut).await
    }

    async fn time_sql<T>(
        &mut self,
        step: Step,
        sql: Option<&'static str>,
        fut: impl Future<Output = T>,
    ) -> T {
        if !self.timed {
            return fut.await;
        }
        // Step by step: wait for this worker's turn first (a crashed
        // worker has no more turns).
        if let Some(hook) = self
            .stepper
            .as_mut()
            .filter(|_| self.faulted != Some(FaultKind::Crash))
        {
            let found = self
                .events
                .last()
                .map(|e| e.note.clone())
                .filter(|n| !n.is_empty());
            if hook.pause(step, found).await == Go::Crashed {
                self.crashed_by_controller(step);
                return fut.await;
            }
        }
        let start = self.since_gate();
        let out = fut.await;
        let end = self.since_gate();
        self.events.push(StepEvent {
            step,
            start_ms: start,
            end_ms: end,
            note: String::new(),
            sql,
        });
        out
    }

    /// Runs `step`, the statement `sql` sent to the database, and records it.
    /// This is also where a planned fault strikes: before, during or after
    /// the step, the connection's server process is terminated.
    pub async fn query<T>(
        &mut self,
        step: Step,
        sql: &'static str,
        fut: impl Future<Output = T>,
    ) -> T {
        // A dead worker takes no more steps: what its code still sends
        // meets the closed connection, and is neither counted nor drawn.
        if self.crashed() {
            return fut.await;
        }
        let sql = (!sql.is_empty()).then_some(sql);
        if step == Step::Work
            && let Some((hang_ups, worker)) = self.hang_up.take()
        {
            hang_ups.work_began(worker);
        }
        let fault = self.fault.clone().filter(|_| self.faulted.is_none());
        let pid = self.backend_pid;
        if let (Some(fault), Some(pid)) = (&fault, pid) {
            if fault.before(step) && fault.arm() {
                self.strike(fault, step, pid, Duration::ZERO).await;
                if self.crashed() {
                    return fut.await;
                }
            } else if fault.during(step) && fault.arm() {
                // Strike halfway through the work, while it is still running.
                self.queries += 1;
                self.faulted = Some(fault.kind);
                let note = fault_note(fault.kind, fault.at, step);
                let (fault, delay) = (fault.clone(), self.strike_delay);
                // The call this work made before the crash stands; the
                // dead worker makes no more.
                let service = self
                    .service
                    .clone()
                    .filter(|_| fault.kind == FaultKind::Crash);
                let killer = tokio::spawn(async move {
                    fault.fire(pid, delay).await;
                    if let Some(service) = service {
                        service.silence();
                    }
                });
                let out = self.time_sql(step, sql, fut).await;
                let _ = killer.await;
                let at = self.since_gate();
                self.events.push(StepEvent {
                    step: Step::Fault,
                    start_ms: at,
                    end_ms: at,
                    note,
                    sql: None,
                });
                return out;
            }
        }
        self.queries += 1;
        self.time_sql(step, sql, fut).await
    }

    async fn strike(&mut self, fault: &Fault, step: Step, pid: i32, delay: Duration) {
        let start = self.since_gate();
        fault.fire(pid, delay).await;
        self.faulted(fault.kind, start, fault_note(fault.kind, fault.at, step));
    }

    /// The controller killed this worker's server process before `step`
    /// (`crashN` in a schedule): it is gone, as after a planned crash.
    fn crashed_by_controller(&mut self, step: Step) {
        let at = self.since_gate();
        self.faulted(FaultKind::Crash, at, format!("crashed {}", before(step)));
    }

    /// A fault struck, from `start` until now: what it did to the request
    /// (a crash silences its service calls), drawn as a fault step.
    fn faulted(&mut self, kind: FaultKind, start: f64, note: String) {
        self.faulted = Some(kind);
        if let (FaultKind::Crash, Some(service)) = (kind, &self.service) {
            service.silence();
        }
        let end = self.since_gate();
        self.events.push(StepEvent {
            step: Step::Fault,
            start_ms: start,
            end_ms: end,
            note,
            sql: None,
        });
    }

    /// Remembers the database error a statement met, whether the strategy
    /// then catches it (check-then-store's lost store) or not.
    pub fn caught(&mut self, err: &tokio_postgres::Error) {
        if let Some(error) = DbError::of(err) {
            self.db_error = Some(error);
        }
    }

    /// Whether the request's worker died (a crash, not a killed connection).
    pub fn crashed(&self) -> bool {
        self.faulted == Some(FaultKind::Crash)
    }

    /// Milliseconds from the gate to now.
    pub fn now_ms(&self) -> f64 {
        self.since_gate()
    }

    /// Notes what the last step found or did.
    pub fn note(&mut self, note: impl Into<String>) {
        // A fault's own note stays as the fault wrote it.
        if let Some(last) = self.events.iter_mut().rev().find(|e| e.step != Step::Fault) {
            last.note = note.into();
        }
    }

    fn since_gate(&self) -> f64 {
        self.gate.elapsed().as_secs_f64() * 1000.0
    }
}

/// What a fault did, in words a person reads in the workers' table ("crashed
/// before it stored the key"), not the flag's value ("before-complete").
fn fault_note(kind: FaultKind, at: super::fault::FaultPoint, step: Step) -> String {
    let when = match at {
        super::fault::FaultPoint::DuringWork => "halfway through its work".to_string(),
        _ => before(step),
    };
    match kind {
        FaultKind::Crash => format!("crashed {when}"),
        FaultKind::Kill => format!("connection killed {when}"),
    }
}

/// "before its work", "before it stored the key": the step a fault came
/// before, as a sentence says it.
fn before(step: Step) -> String {
    match step {
        Step::Store => "before it stored the key".into(),
        Step::Complete => "before it completed its claim".into(),
        Step::Work => "before its work".into(),
        other => format!("before its {}", other.name()),
    }
}
