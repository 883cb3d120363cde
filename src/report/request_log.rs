//! `idem serve`'s request log: lines handed to a writer thread of its own, and dropped (and counted) when stdout cannot keep up, so the app never waits on its log.
//!
//! stdout may be a pipe nobody reads, or a terminal paused with Ctrl-S: a
//! write then blocks for as long as the reader likes. The app's handlers
//! only ever offer a line to a bounded queue; a full queue drops the line.
//! The writer writes straight to descriptor 1, outside std's `Stdout`
//! buffer and lock, so a blocked write holds nothing the rest of the
//! process needs: Ctrl-C and SIGTERM still stop the app and drop its
//! tables, and the exit does not wait for the writer.

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};

/// How many lines may wait for stdout before new ones are dropped.
const QUEUE: usize = 1024;

/// Lines dropped in this process because stdout did not keep up.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Where the app's handlers send their lines.
#[derive(Clone)]
pub struct RequestLog {
    queue: SyncSender<String>,
}

impl RequestLog {
    /// Starts the writer thread; the lines are fitted to `width` columns.
    pub fn start(width: usize) -> std::io::Result<Self> {
        let (queue, lines) = mpsc::sync_channel::<String>(QUEUE);
        std::thread::Builder::new()
            .name("idem-request-log".into())
            .spawn(move || {
                // SAFETY: descriptor 1 is stdout for the life of the process;
                // ManuallyDrop keeps this handle from ever closing it.
                let mut out = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
                let mut told = 0;
                for line in lines {
                    let dropped = DROPPED.load(Ordering::Relaxed);
                    let mut text = String::new();
                    if dropped > told {
                        text.push_str(&format!(
                            "… {} log lines dropped: stdout did not keep up\n",
                            dropped - told
                        ));
                        told = dropped;
                    }
                    text.push_str(&super::width::fit(&line, width));
                    // A reader that has gone (EPIPE) ends the log, not the app.
                    if out.write_all(text.as_bytes()).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self { queue })
    }

    /// Offers a line; never waits. A line the writer has no room for is
    /// dropped and counted.
    pub fn offer(&self, line: String) {
        match self.queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// How many lines this process dropped.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}
