//! The progress bar on stderr for long work; hidden for `--json` and when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub fn bar(len: u64, hidden: bool, unit: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template =
        format!("{{bar:40.cyan/blue}} {{pos}}/{{len}} {unit} · {{elapsed}} · eta {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("█▉▊▋▌▍▎▏ "));
    }
    bar
}

/// A count of `unit`s done, for work whose length is not known before it
/// ends (an exploration stops when its walk does).
pub fn counter(hidden: bool, unit: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let template = format!("{{spinner:.cyan}} {{pos}} {unit} · {{elapsed}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
