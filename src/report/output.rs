//! Writing to stdout, where a closed pipe (`idem ... | head`) ends the output quietly.

use std::io::{ErrorKind, Write};

/// Raised when the reader of stdout has gone away; the run stops and exits 0.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct BrokenPipe;

/// Writes `text` to stdout and flushes it.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Err(BrokenPipe.into()),
        Err(err) => Err(err.into()),
    }
}

/// Writes one JSON Lines record.
pub fn emit_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut line = serde_json::to_string(value)?;
    line.push('\n');
    emit(&line)
}
