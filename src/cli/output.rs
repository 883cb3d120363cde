//! What is shown and how: colour for every command, and a race's extra views.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is not set.
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether the user forced colour on or off; `None` leaves it to the output.
    pub fn forced(self) -> Option<bool> {
        match self {
            ColorChoice::Auto => None,
            ColorChoice::Always => Some(true),
            ColorChoice::Never => Some(false),
        }
    }
}

/// What to show besides a race's figures.
#[derive(Debug, Clone, Args)]
pub struct ShowFlags {
    /// Draw each worker's steps on a timeline (one race only).
    #[arg(long)]
    pub trace: bool,

    /// With the timeline, the statement each step sent and, for
    /// check-then-store and claim-work-complete, the line of the course's
    /// Rails code it stands for (implies --trace).
    #[arg(long)]
    pub sql: bool,

    /// Write the race's timeline as a page to open in a browser: a lane per
    /// worker, a bar per step with its SQL, lock waits as arrows (one race only).
    #[arg(long, value_name = "FILE.html")]
    pub timeline: Option<PathBuf>,

    /// Write the race's steps in the Chrome Trace Event format, for
    /// Perfetto or chrome://tracing (one race only).
    #[arg(long, value_name = "FILE")]
    pub trace_json: Option<PathBuf>,

    /// Print one JSON object per race (JSON Lines) and nothing else on stdout.
    #[arg(long)]
    pub json: bool,
}
