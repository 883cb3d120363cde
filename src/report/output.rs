//! Where results go: tables for people or JSON Lines for machines, chosen once per run.
//!
//! A command is handed an [`Output`] when it is planned and writes every
//! result through it: [`Output::record`] for each result (a JSON record,
//! or the text a renderer makes of it), [`Output::text`] for what only
//! people read (summaries, timelines, notes). The commands never ask which
//! one was chosen. When the reader of stdout has gone (`idem ... | head`)
//! the run ends quietly, unless its exit status is a verdict (a scenario
//! run, a probe, a challenge): then the rest is dropped and the run goes on
//! to that verdict. A pager that failed is said on stderr and the terminal
//! gets the output instead.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::ProgressBar;
use serde::Serialize;

/// How a run writes its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Tables and sentences, with colour where it helps.
    Table,
    /// One JSON object per result (JSON Lines) and nothing else on stdout.
    Json,
}

impl Output {
    /// `--json` or not.
    pub fn from_json_flag(json: bool) -> Self {
        if json { Output::Json } else { Output::Table }
    }

    /// One result: its JSON record for machines; for people, the text
    /// `render` makes of it (nothing, if it renders to nothing).
    pub fn record<T: Serialize>(
        self,
        value: &T,
        render: impl FnOnce(&T) -> String,
    ) -> anyhow::Result<()> {
        match self {
            Output::Json => emit_json(value),
            Output::Table => emit(&render(value)),
        }
    }

    /// Text for people only: summaries, timelines, notes. Machines get none.
    pub fn text(self, render: impl FnOnce() -> String) -> anyhow::Result<()> {
        match self {
            Output::Json => Ok(()),
            Output::Table => emit(&render()),
        }
    }

    /// Whether people read this run (for work done only to show them
    /// something, such as reading an audit).
    pub fn for_people(self) -> bool {
        self == Output::Table
    }

    /// A progress bar over `len` items, hidden when machines read the output.
    pub fn progress(self, len: u64, unit: &str) -> ProgressBar {
        super::progress::bar(len, self == Output::Json, unit)
    }
}

/// Writes people's `text` to stdout, every line fitted to the screen, and flushes it.
pub fn emit(text: &str) -> anyhow::Result<()> {
    write_out(&super::width::fit(text, super::width::width()))
}

/// Writes `text` to stdout as it is, never fitted to a width: lines meant
/// for a shell (`eval "$(idem db)"`), which a wrap would break.
pub fn emit_verbatim(text: &str) -> anyhow::Result<()> {
    write_out(text)
}

/// Raised when the reader of stdout has gone away and the command's exit
/// status says nothing its output did not: the run stops and exits 0.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct BrokenPipe;

/// Set by a command whose exit status is a verdict (a scenario run, a
/// probe, a challenge): when its reader goes, it must still reach it.
static VERDICT_AWAITED: AtomicBool = AtomicBool::new(false);

/// Set once stdout's reader is gone for such a command: what is written
/// after that is dropped, and the run goes on to its verdict, so that its
/// exit status is its own, whatever became of its output.
static READER_GONE: AtomicBool = AtomicBool::new(false);

/// This run's exit status is a verdict: a closed stdout does not end it.
pub fn verdict_awaited() {
    VERDICT_AWAITED.store(true, Ordering::Relaxed);
}

fn write_out(text: &str) -> anyhow::Result<()> {
    if text.is_empty() || READER_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    // A value a probe plan read from a `${VAR}` is never shown, whatever
    // result or sentence it came back in.
    let text = &crate::db::secret::hide_variables(text);
    let write = || {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    match write() {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == ErrorKind::BrokenPipe => {
            // A pager that failed gives the terminal back: write there.
            if let Some(failed) = super::pager::failed() {
                eprintln!("idem: {failed}; writing to the terminal instead");
                return write().map_err(Into::into);
            }
            if !VERDICT_AWAITED.load(Ordering::Relaxed) {
                return Err(BrokenPipe.into());
            }
            READER_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(err) => Err(err.into()),
    }
}

/// Writes one JSON Lines record.
fn emit_json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut line = serde_json::to_string(value)?;
    line.push('\n');
    write_out(&line)
}
