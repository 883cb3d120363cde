//! Child programs idem waits on (`initdb`, `postgres --version`, `pg_config`): bounded, stoppable, and never outliving idem.
//!
//! Three promises: a child dies with idem, even if idem is killed with
//! SIGKILL (Linux's parent-death signal); a Ctrl-C stops the child at once
//! rather than after it finishes; and a child that hangs is stopped after a
//! time limit, with an error naming it.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Set when Ctrl-C or SIGTERM arrives: blocking work checks it and stops.
static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every child and wait loop to stop (called on a signal).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The blocking part of a start-up was stopped by a signal.
#[derive(Debug, thiserror::Error)]
#[error("stopped by a signal")]
pub struct Stopped;

/// Fails with [`Stopped`] if a stop was asked for.
pub fn check_stop() -> Result<()> {
    if stop_requested() {
        return Err(Stopped.into());
    }
    Ok(())
}

/// Makes `cmd`'s process die with idem's. Must be the last change to `cmd`
/// before it is spawned; works with `uid`/`gid`, which std applies first
/// (a change of user clears the parent-death signal).
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // idem died before the signal was set: do not start at all.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("idem is gone"));
            }
            Ok(())
        })
    }
}

/// Runs `cmd` to the end and returns its output, unless it outlasts `limit`
/// or a stop is asked for: then it is killed and an error says which.
pub fn output(cmd: &mut Command, what: &str, limit: Duration) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = die_with_parent(cmd)
        .spawn()
        .with_context(|| format!("could not run {what}"))?;
    let readers = [
        child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = out.read_to_end(&mut buf);
                buf
            })
        }),
        child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = err.read_to_end(&mut buf);
                buf
            })
        }),
    ];
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let stopped = stop_requested();
        if stopped || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            if stopped {
                return Err(Stopped.into());
            }
            bail!(
                "{what} did not finish within {} s; stopped it",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let [stdout, stderr] =
        readers.map(|r| r.map(|h| h.join().unwrap_or_default()).unwrap_or_default());
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}
