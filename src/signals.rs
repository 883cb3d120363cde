//! Ctrl-C and SIGTERM: stop the work, then clean up as on any other exit.
//!
//! The listeners are installed before anything is started, so a signal that
//! arrives at any moment is caught; the run is then dropped and the cluster
//! and schema are removed by the normal closing path.

use anyhow::Result;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The run was stopped by a signal; main exits with 128 + its number.
#[derive(Debug, Clone, thiserror::Error)]
#[error("interrupted by {name}; everything idem started was cleaned up")]
pub struct Interrupted {
    pub name: &'static str,
    pub number: i32,
}

/// Listeners for the signals that ask idem to stop.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub fn install() -> Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves when either signal arrives, after asking any blocking
    /// start-up work (a child process, a wait for the server) to stop.
    pub async fn received(&mut self) -> Interrupted {
        let signal = tokio::select! {
            _ = self.interrupt.recv() => Interrupted { name: "SIGINT", number: libc::SIGINT },
            _ = self.terminate.recv() => Interrupted { name: "SIGTERM", number: libc::SIGTERM },
        };
        crate::db::child::request_stop();
        signal
    }
}
