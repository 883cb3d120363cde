//! How wide the screen is, and text made to fit it: paragraphs wrapped at spaces, never a figure cut.
//!
//! The width is `COLUMNS` when set, else the terminal's. Output going to a
//! file or a pipe without `COLUMNS` is not fitted (a pager or an editor
//! wraps it as it likes), and JSON never is.

use std::io::IsTerminal;

/// Below this, nothing is narrowed further: a table's numbers need room.
pub const MIN_WIDTH: usize = 40;

/// How wide output is when nothing says: as wide as it needs.
const UNFITTED: usize = 100_000;

/// The width people's output is fitted to.
pub fn width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0);
    columns
        .or_else(terminal_width)
        .unwrap_or(UNFITTED)
        .max(MIN_WIDTH)
}

fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ fills a winsize struct, which all-zero is a valid value of.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: fd 1 is open; `size` is a valid, writable winsize.
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
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
