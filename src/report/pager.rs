//! Long output through a pager, as git does it: `$PAGER`, or `less` told to quit on one screen and keep colour.
//!
//! Only when standard output is a terminal, and never with `--no-pager` or
//! `--json`. The pager reads what idem writes to its standard output; the
//! width output is fitted to is the terminal's, measured before the pager
//! takes the output over. When the pager is gone (its `q`), writing fails
//! with a broken pipe: the rest of the output is dropped and the run goes
//! on to its own exit status. A pager that failed (it exited with an error,
//! or could not be run) gives the terminal back, and the output goes there.
//! On Ctrl-C or SIGTERM idem does not wait for a pager that ignores them:
//! it is ended, and idem stops within a second as it promises.

use std::io::{IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// A running pager; dropping it hands the terminal back and waits for the
/// reader to quit it, so the shell's prompt does not come back under it.
pub struct Pager {
    child: Child,
    /// Standard output as it was: the terminal.
    terminal: OwnedFd,
}

/// The pager now running, for [`failed`] to look at from where output is
/// written: its process and the terminal's descriptor.
static RUNNING: Mutex<Option<(u32, RawFd)>> = Mutex::new(None);

/// Asked when writing to the pager fails: if the pager has exited with an
/// error (as opposed to being quit by its reader), stdout is given back to
/// the terminal and the failure is described; `None` otherwise.
pub fn failed() -> Option<String> {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    let (pid, terminal) = (*running)?;
    let mut status = 0;
    // SAFETY: asks, without waiting, how the pager this process started ended.
    let ended = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    if ended != pid as libc::pid_t {
        return None;
    }
    *running = None;
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    if code == Some(0) {
        return None;
    }
    // SAFETY: both descriptors are open; dup2 makes fd 1 the terminal again.
    unsafe {
        libc::dup2(terminal, 1);
    }
    let command = command().unwrap_or_default();
    Some(match code {
        Some(code) => format!("the pager ({command}) exited with status {code}"),
        None => format!("the pager ({command}) was ended by a signal"),
    })
}

/// The pager command: `IDEM_PAGER`, else `PAGER`, else `less`. An empty
/// one, or `cat`, means no pager.
fn command() -> Option<String> {
    let chosen = std::env::var("IDEM_PAGER")
        .or_else(|_| std::env::var("PAGER"))
        .unwrap_or_else(|_| "less".into());
    let chosen = chosen.trim().to_string();
    (!chosen.is_empty() && chosen != "cat").then_some(chosen)
}

/// Starts the pager when `wanted` and standard output is a terminal; `None`
/// leaves the output where it is (also when no pager can be started).
pub fn start(wanted: bool) -> Option<Pager> {
    if !wanted || !std::io::stdout().is_terminal() {
        return None;
    }
    let command = command()?;
    super::width::fit_to_terminal();
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(&command).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        // Quit if it fits one screen, keep colour, leave the text on screen.
        shell.env("LESS", "FRX");
    }
    if std::env::var_os("LV").is_none() {
        shell.env("LV", "-c");
    }
    let mut child = shell.spawn().ok()?;
    let pipe = child.stdin.take()?;
    let _ = std::io::stdout().flush();
    // SAFETY: fd 1 is open for the whole run; dup gives a new descriptor
    // this process owns from here on.
    let saved = unsafe { libc::dup(1) };
    if saved < 0 {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    // SAFETY: `saved` was just returned by dup and nothing else owns it.
    let terminal = unsafe { OwnedFd::from_raw_fd(saved) };
    // SAFETY: both descriptors are open; dup2 makes fd 1 the pipe's write end.
    if unsafe { libc::dup2(pipe.as_raw_fd(), 1) } < 0 {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    // fd 1 holds the pipe open now; this handle's own descriptor may go.
    drop(pipe);
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Some((child.id(), terminal.as_raw_fd()));
    Some(Pager { child, terminal })
}

impl Pager {
    /// Hands the terminal back and waits for the reader to quit the pager,
    /// unless `stop` (a signal) comes first: then the pager is ended, and
    /// what `stop` gave is returned as the run's end.
    pub async fn close<E>(mut self, stop: impl Future<Output = E>) -> Result<(), E> {
        self.hand_back();
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                stopped = &mut stop => {
                    self.end();
                    return Err(stopped);
                }
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if !matches!(self.child.try_wait(), Ok(None)) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Standard output back to the terminal: that closes the last write
    /// end of the pipe, and the pager sees the end of its input.
    fn hand_back(&mut self) {
        let _ = std::io::stdout().flush();
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // SAFETY: both descriptors are open; dup2 replaces fd 1.
        unsafe {
            libc::dup2(self.terminal.as_raw_fd(), 1);
        }
    }

    /// Ends the pager (it may ignore Ctrl-C, as less does) and reaps it.
    fn end(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.hand_back();
        // After a signal nobody waits for a pager that ignores it.
        if crate::db::child::stop_requested() {
            self.end();
        } else {
            let _ = self.child.wait();
        }
    }
}
