//! The worker's end of step-by-step control: pause before each step until the harness says go.

use tokio::sync::mpsc;

use super::Step;

/// What a worker tells the controller.
#[derive(Debug)]
pub enum TurnEvent {
    /// About to take `step`; waiting for its turn. `found` is what its
    /// last step found or did, in the trace's words ("no key", "claim
    /// pending"), if it said.
    Paused {
        worker: usize,
        step: Step,
        found: Option<String>,
    },
    /// Its server process, once it has a connection.
    Pid { worker: usize, pid: i32 },
    /// Done: it has answered.
    Finished { worker: usize },
}

/// What the controller tells a paused worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Go {
    /// Take the step.
    Step,
    /// Your server process has been killed: you crashed before the step.
    Crashed,
}

/// The worker's end: pause before a step until the controller says go.
#[derive(Debug)]
pub struct StepHook {
    pub(crate) worker: usize,
    events: mpsc::UnboundedSender<TurnEvent>,
    go: mpsc::UnboundedReceiver<Go>,
}

impl StepHook {
    /// The hook of `worker`, reporting to `events` and waiting on `go`.
    pub fn new(
        worker: usize,
        events: mpsc::UnboundedSender<TurnEvent>,
        go: mpsc::UnboundedReceiver<Go>,
    ) -> Self {
        Self { worker, events, go }
    }

    /// Announces `step`, after a step that `found` something, and waits
    /// for the turn; a controller gone lets the step run.
    pub async fn pause(&mut self, step: Step, found: Option<String>) -> Go {
        let _ = self.events.send(TurnEvent::Paused {
            worker: self.worker,
            step,
            found,
        });
        self.go.recv().await.unwrap_or(Go::Step)
    }

    pub fn pid(&self, pid: i32) {
        let _ = self.events.send(TurnEvent::Pid {
            worker: self.worker,
            pid,
        });
    }

    pub fn finished(&self) {
        let _ = self.events.send(TurnEvent::Finished {
            worker: self.worker,
        });
    }
}

/// Tells the controller its worker has finished when dropped: however the
/// worker's request ends (answered, refused at its checkout, or its future
/// dropped), the controller never waits for it in vain.
#[derive(Debug)]
pub struct Finisher {
    worker: usize,
    events: mpsc::UnboundedSender<TurnEvent>,
}

impl StepHook {
    /// This hook's [`Finisher`].
    pub fn finisher(&self) -> Finisher {
        Finisher {
            worker: self.worker,
            events: self.events.clone(),
        }
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        let _ = self.events.send(TurnEvent::Finished {
            worker: self.worker,
        });
    }
}
