//! Effects counted by any command (`--count-cmd`), for effects that are not in PostgreSQL: it runs before and after, prints one whole number, and is bounded in time and output; its stderr is shown, escaped, when it fails.
//!
//! It runs under a watcher ([`crate::lifeline`]), so its process group
//! dies with idem, a `kill -9` included; a process the command moves out
//! of its group (`setsid`) is not followed.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::controls::escaped;
use crate::lifeline::Watched;

/// The most of its stdout and of its stderr read: a count is one number.
pub const MAX_OUTPUT_BYTES: u64 = 4096;

/// A command that prints the number of effects so far.
#[derive(Debug, Clone)]
pub struct CmdCounter {
    cmd: String,
    timeout: Duration,
}

impl CmdCounter {
    /// `cmd`, run by `sh -c`, given `timeout` each time.
    pub fn new(cmd: &str, timeout: Duration) -> Result<Self> {
        if cmd.trim().is_empty() {
            bail!("--count-cmd is empty; give a command that prints one whole number");
        }
        Ok(Self {
            cmd: cmd.to_owned(),
            timeout,
        })
    }

    /// Runs the command once and reads its number. Past the timeout its
    /// whole process group is killed.
    pub async fn count(&self) -> Result<i64> {
        let mut watched = Watched::new("idem-count", "/bin/sh", ["-c", self.cmd.as_str()])
            .context("--count-cmd could not make its lifeline")?;
        watched
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its group is killed by its watcher however idem ends (kill -9
        // included) once `_lifeline` is gone.
        let (mut child, _lifeline) = watched.spawn().context("--count-cmd could not start sh")?;
        // Killed with everything it started if it outlives its bound, or
        // if the probe's future is dropped meanwhile (--timeout-ms).
        let mut group = Group(child.id().and_then(|id| i32::try_from(id).ok()));
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let ran = async {
            let (out, err) = tokio::join!(bounded(stdout), bounded(stderr));
            // Too much output: refused before its leader is waited for, so
            // the group is still its own when it is killed.
            let (out, err) = (out?, err?);
            let status = child.wait().await?;
            anyhow::Ok((status, out, err))
        };
        let Ok(ran) = tokio::time::timeout(self.timeout, ran).await else {
            bail!(
                "--count-cmd did not finish within {} ms (--count-timeout-ms); it was killed",
                self.timeout.as_millis()
            );
        };
        let (status, out, err) = ran?;
        // Its leader has been waited for: the group may be gone, its id reused.
        group.0 = None;
        let said = |bytes: &[u8]| escaped(String::from_utf8_lossy(bytes).trim()).into_owned();
        if !status.success() {
            bail!("--count-cmd failed ({status}): {}", said(&err));
        }
        let text = said(&out);
        text.parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .with_context(|| format!("--count-cmd printed {text:?}, not one whole number"))
    }
}

/// The process group a count command leads, killed when this is dropped
/// unless the command ended on its own first.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            // SAFETY: signals the group this command leads, which is still
            // alive: its leader has not been waited for.
            unsafe { libc::killpg(group, libc::SIGKILL) };
        }
    }
}

/// Up to [`MAX_OUTPUT_BYTES`] of `pipe`; more is an error.
async fn bounded(pipe: Option<impl AsyncRead + Unpin>) -> Result<Vec<u8>> {
    let Some(pipe) = pipe else {
        return Ok(Vec::new());
    };
    let mut read = Vec::new();
    pipe.take(MAX_OUTPUT_BYTES + 1)
        .read_to_end(&mut read)
        .await?;
    if read.len() as u64 > MAX_OUTPUT_BYTES {
        bail!("--count-cmd wrote more than {MAX_OUTPUT_BYTES} bytes; a count is one number");
    }
    Ok(read)
}
