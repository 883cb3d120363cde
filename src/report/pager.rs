//! Long output through a pager, as git does it: `$PAGER`, or `less` told to quit on one screen and keep colour.
//!
//! Only when standard output is a terminal, and never with `--no-pager` or
//! `--json`. The pager reads what idem writes to its standard output; the
//! width output is fitted to is the terminal's, measured before the pager
//! takes the output over. When the pager is gone (its `q`), writing fails
//! with a broken pipe, which ends the run as a finished one.

use std::io::{IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};

/// A running pager; dropping it hands the terminal back and waits for the
/// reader to quit it, so the shell's prompt does not come back under it.
pub struct Pager {
    child: Child,
    /// Standard output as it was: the terminal.
    terminal: OwnedFd,
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
    Some(Pager { child, terminal })
}

impl Drop for Pager {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // Standard output back to the terminal: that closes the last write
        // end of the pipe, and the pager sees the end of its input.
        // SAFETY: both descriptors are open; dup2 replaces fd 1.
        unsafe {
            libc::dup2(self.terminal.as_raw_fd(), 1);
        }
        let _ = self.child.wait();
    }
}
