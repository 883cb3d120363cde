//! How wide the screen is, and text made to fit it: paragraphs wrapped at spaces, never a figure cut.
//!
//! The width is `COLUMNS` when set, else the terminal's (measured before a
//! pager takes the output over), else 80 for a file or a pipe. JSON is
//! never fitted.

use std::io::IsTerminal;

/// Below this, nothing is narrowed further: a table's numbers need room.
pub const MIN_WIDTH: usize = 40;

/// How wide output to a file or a pipe is when `COLUMNS` does not say.
pub const UNSAID: usize = 80;

/// The terminal's width, measured before a pager took standard output over.
static PAGED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// A width fixed for the whole process, above everything else.
static FIXED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Output goes to a pager from here on: fit it to the terminal it shows on.
pub fn fit_to_terminal() {
    if let Some(width) = terminal_width() {
        let _ = PAGED.set(width);
    }
}

/// Fits all output of this process to `width` columns, whatever `COLUMNS`
/// and the terminal say (for renderer snapshots); the first width stays.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn fix(width: usize) {
    let _ = FIXED.set(width);
}

/// `items` joined with ` · `, a new line begun only between two items, so
/// that no item (`work 20 ms`, `key "k"`) is split.
pub fn join_fitted(items: &[String], width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for item in items {
        let w = visible(item);
        if used == 0 {
            out.push_str(item);
            used = w;
        } else if used + 3 + w > width {
            out.push('\n');
            out.push_str(item);
            used = w;
        } else {
            out.push_str(" · ");
            out.push_str(item);
            used += 3 + w;
        }
    }
    out
}

/// The width people's output is fitted to: `COLUMNS`, else the terminal's
/// (also when paged), else 80; a width fixed for the process above all.
pub fn width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0);
    FIXED
        .get()
        .copied()
        .or(columns)
        .or_else(|| PAGED.get().copied())
        .or_else(terminal_width)
        .unwrap_or(UNSAID)
        .max(MIN_WIDTH)
}

fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    width_of(1)
}

/// The width of the terminal standard error shows on; `None` for a file or
/// a pipe, where an error stays one line.
pub fn stderr_width() -> Option<usize> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    width_of(2).map(|w| w.max(MIN_WIDTH))
}

/// The rows of the terminal standard output shows on: `LINES`, else the
/// terminal's, else 24.
pub fn height() -> usize {
    let lines = std::env::var("LINES")
        .ok()
        .and_then(|l| l.trim().parse::<usize>().ok())
        .filter(|l| *l > 0);
    lines
        .or_else(|| {
            winsize(1)
                .filter(|s| s.ws_row > 0)
                .map(|s| usize::from(s.ws_row))
        })
        .unwrap_or(24)
}

/// The columns of the terminal behind descriptor `fd`.
fn width_of(fd: i32) -> Option<usize> {
    winsize(fd)
        .filter(|s| s.ws_col > 0)
        .map(|s| usize::from(s.ws_col))
}

/// The size of the terminal behind descriptor `fd`, if it is one.
fn winsize(fd: i32) -> Option<libc::winsize> {
    // SAFETY: TIOCGWINSZ fills a winsize struct, which all-zero is a valid value of.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `size` is a valid, writable winsize.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    ok.then_some(size)
}

/// The columns `text` takes on screen: its characters less colour codes.
pub fn visible(text: &str) -> usize {
    let mut n = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// Every line of `text` no wider than `width`, wrapped at spaces; a
/// continued line keeps the indent of the line it continues. A single word
/// wider than the screen (a URL) stays whole on its own line.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if visible(line) <= width {
            out.push_str(line);
            continue;
        }
        let indent_len = line.len() - line.trim_start_matches(' ').len();
        let indent = &line[..indent_len];
        let mut used = 0;
        for word in line[indent_len..].split(' ') {
            let w = visible(word);
            if used == 0 {
                out.push_str(indent);
                out.push_str(word);
                used = indent_len + w;
            } else if used + 1 + w > width {
                out.push('\n');
                out.push_str(indent);
                out.push_str(word);
                used = indent_len + w;
            } else {
                out.push(' ');
                out.push_str(word);
                used += 1 + w;
            }
        }
    }
    out
}

/// A command to copy, indented, in lines no wider than `width`: each
/// break comes before a flag, which keeps its value beside it, and the
/// line before it ends in ` \`, so a paste runs all of it.
pub fn shell_lines(command: &str, width: usize) -> String {
    // The command's words in groups: what precedes the first flag, then
    // each flag with the values that follow it.
    let mut groups: Vec<String> = Vec::new();
    for word in command.split(' ') {
        match groups.last_mut() {
            Some(group) if !word.starts_with('-') => {
                group.push(' ');
                group.push_str(word);
            }
            _ => groups.push(word.to_string()),
        }
    }
    let mut lines = vec![String::from("  ")];
    for group in groups {
        let line = lines.last_mut().expect("one line at least");
        let fits = line.chars().count() + 1 + group.chars().count() + 2 <= width;
        if line.trim().is_empty() {
            line.push_str(&group);
        } else if fits {
            line.push(' ');
            line.push_str(&group);
        } else {
            line.push_str(" \\");
            lines.push(format!("    {group}"));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_spaces_and_keep_their_indent() {
        let text = "  one two three four five six seven";
        let fitted = fit(text, 14);
        assert_eq!(fitted, "  one two\n  three four\n  five six\n  seven");
        assert!(fitted.lines().all(|l| visible(l) <= 14));
        assert_eq!(fit("short\n\nlines", 10), "short\n\nlines");
        // A word wider than the screen is never cut.
        assert_eq!(
            fit("a https://example.com/long b", 10),
            "a\nhttps://example.com/long\nb"
        );
    }

    #[test]
    fn colour_codes_take_no_room() {
        let red = "\u{1b}[31mred\u{1b}[0m";
        assert_eq!(visible(red), 3);
        assert_eq!(
            fit(&format!("{red} {red} {red}"), 7),
            format!("{red} {red}\n{red}")
        );
    }
}
