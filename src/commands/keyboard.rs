//! One key at a time from the terminal: the scheduler's turns in `idem step`, a learner's prediction, the pause between a lesson's screens. Read on a blocking thread, so that Ctrl-C still stops idem at once.

use std::io::{BufRead, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

/// A key pressed at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    /// Ctrl-D, or the end of standard input.
    End,
}

/// Standard input, one key at a time on a terminal (its line mode off while
/// waiting, so a key needs no Enter), one line at a time otherwise.
pub struct Keyboard {
    raw: bool,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

impl Keyboard {
    pub fn open() -> Self {
        Self {
            raw: std::io::stdin().is_terminal(),
            lines: std::io::stdin().lock().lines(),
        }
    }

    pub fn enter_hint(&self) -> &'static str {
        if self.raw { "" } else { " (then Enter)" }
    }

    /// The next key that is not Enter or a space (Enter still works: it
    /// is simply not needed).
    pub async fn next(&mut self) -> Result<Key> {
        loop {
            match self.any().await? {
                Key::Char('\n' | '\r' | ' ') => continue,
                key => return Ok(key),
            }
        }
    }

    /// The next key, Enter too (as `'\n'`).
    pub async fn any(&mut self) -> Result<Key> {
        if !self.raw {
            return Ok(match self.lines.next().transpose()? {
                None => Key::End,
                Some(line) => line
                    .trim()
                    .chars()
                    .next()
                    .map_or(Key::Char('\n'), Key::Char),
            });
        }
        // Read on a blocking thread, so that Ctrl-C is still seen here; if
        // this future is dropped, the read stops within 50 ms and puts the
        // terminal back as it was.
        let stop = Arc::new(AtomicBool::new(false));
        let _stop_on_drop = StopOnDrop(stop.clone());
        let key = tokio::task::spawn_blocking(move || read_key(&stop)).await??;
        Ok(match key {
            None | Some(0x04) => Key::End,
            Some(b'\r') => Key::Char('\n'),
            Some(byte) => Key::Char(char::from(byte)),
        })
    }
}

/// Sets its flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One byte from the terminal with its line mode and echo off for the
/// read; Ctrl-C still sends SIGINT. `None` at the end of input, or once
/// `stop` is set.
fn read_key(stop: &AtomicBool) -> Result<Option<u8>> {
    // SAFETY: termios is plain data; tcgetattr fills it for fd 0.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd 0 is open; `saved` is writable.
    if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let mut raw = saved;
    raw.c_lflag &= !(libc::ICANON | libc::ECHO);
    raw.c_cc[libc::VMIN] = 1;
    raw.c_cc[libc::VTIME] = 0;
    // SAFETY: `raw` is a valid termios derived from the terminal's own.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) };
    let mut byte = 0u8;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        // After Ctrl-Z and `fg` the shell has put line mode back: take it off again.
        // SAFETY: termios is plain data; tcgetattr fills it for fd 0.
        let mut now: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 is open; `now` is writable; `raw` is valid as above.
        if unsafe { libc::tcgetattr(0, &mut now) } == 0
            && now.c_lflag & (libc::ICANON | libc::ECHO) != 0
        {
            unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) };
        }
        let mut ready = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a 50 ms timeout.
        if unsafe { libc::poll(&mut ready, 1, 50) } > 0 {
            // SAFETY: reads at most one byte into `byte`.
            n = unsafe { libc::read(0, (&mut byte as *mut u8).cast(), 1) };
            break;
        }
    }
    // SAFETY: puts back the settings read above.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, &saved) };
    match n {
        1 => Ok(Some(byte)),
        0 => Ok(None),
        _ => Err(std::io::Error::last_os_error().into()),
    }
}
