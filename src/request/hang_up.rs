//! A client that hangs up mid-request on purpose (`race --http --hang-up`): the app tells the client's side when the request's work begins.
//!
//! A client cannot see the server's steps, so the race's app, which runs
//! in the same process, tells it: the request's trace says when its work
//! begins, and the worker named by the plan (or the first to begin its
//! work, if none is named) is told once. Its client then waits halfway
//! through the work and closes its connection, as a client whose timeout
//! fired does; what the app does then is `--on-hangup`'s.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::oneshot;

/// Who hangs up, and the clients waiting to be told.
#[derive(Debug)]
pub struct HangUps {
    /// The worker that hangs up; `None`: the first whose work begins.
    worker: Option<usize>,
    /// Set once a client was told: one hang-up a race.
    told: AtomicBool,
    waiting: Mutex<HashMap<usize, oneshot::Sender<()>>>,
}

impl HangUps {
    pub fn new(worker: Option<usize>) -> Self {
        Self {
            worker,
            told: AtomicBool::new(false),
            waiting: Mutex::default(),
        }
    }

    /// The client's side: a receiver told when `worker`'s work begins, if
    /// this worker may be the one that hangs up.
    pub fn listen(&self, worker: usize) -> Option<oneshot::Receiver<()>> {
        if self.worker.is_some_and(|w| w != worker) {
            return None;
        }
        let (tell, told) = oneshot::channel();
        self.lock().insert(worker, tell);
        Some(told)
    }

    /// The app's side: `worker`'s work began. Tells its client to hang up
    /// if it is the one, and no client was told before.
    pub fn work_began(&self, worker: usize) {
        let Some(tell) = self.lock().remove(&worker) else {
            return;
        };
        if !self.told.swap(true, Ordering::SeqCst) {
            let _ = tell.send(());
        }
    }

    /// Forgets the clients of a race that ended, before the next one.
    pub fn reset(&self) {
        self.told.store(false, Ordering::SeqCst);
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, oneshot::Sender<()>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}
