//! Colour, used where it carries meaning: green for a figure that is right, red for one that is not.

use std::io::IsTerminal;

use colored::{ColoredString, Colorize};

/// Decides once, for the whole run, whether to colour: as the user forced
/// it (`--color always|never`), else `NO_COLOR` (any non-empty value turns
/// colour off), then whether stdout is a terminal.
pub fn init(forced: Option<bool>) {
    let on = forced.unwrap_or_else(|| {
        std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
    });
    colored::control::set_override(on);
}

pub fn good(text: impl AsRef<str>) -> ColoredString {
    text.as_ref().green().bold()
}

pub fn bad(text: impl AsRef<str>) -> ColoredString {
    text.as_ref().red().bold()
}

pub fn warn(text: impl AsRef<str>) -> ColoredString {
    text.as_ref().yellow()
}

pub fn dim(text: impl AsRef<str>) -> ColoredString {
    text.as_ref().dimmed()
}

pub fn strong(text: impl AsRef<str>) -> ColoredString {
    text.as_ref().bold()
}

/// A count of XP rows: green when it is the one expected, red otherwise.
pub fn judged(value: u64, right: bool) -> ColoredString {
    if right {
        good(value.to_string())
    } else {
        bad(value.to_string())
    }
}
