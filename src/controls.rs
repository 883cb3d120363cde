//! Text from a file or a server, made safe to show: its control characters written out, so that what a file says reaches the terminal as text, never as commands.
//!
//! A guard file, a scenario file or a server's error can hold escape
//! sequences (an OSC 52 that sets the clipboard, a title, a screen clear
//! that paints a fake verdict). Shown raw, the terminal obeys them, with or
//! without `--color`. Every such text is shown through [`escaped`]: C0
//! controls, DEL and the C1 range become `\x1b`, `\u{9b}` and so on;
//! a tab stays a tab.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character but a tab written out, newlines
/// too: what a file or a server said, on one line.
pub fn escaped(text: &str) -> Cow<'_, str> {
    let shown = |c: char| c == '\t' || !c.is_control();
    if text.chars().all(shown) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if shown(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// The error and its causes joined as anyhow's `{:#}` does, but each said
/// once: drivers often repeat their cause's text in their own message
/// ("timestamp out of range: timestamp out of range").
pub fn causes_once(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_written_out_and_plain_text_is_kept() {
        let osc52 = "SELECT 1 \u{1b}]52;c;ZWNobyBwd25lZA==\u{7}-- done";
        assert_eq!(
            escaped(osc52),
            "SELECT 1 \\x1b]52;c;ZWNobyBwd25lZA==\\x07-- done"
        );
        assert_eq!(escaped("a\u{9b}2J b\u{7f}"), "a\\u{9b}2J b\\x7f");
        assert_eq!(escaped("line\nnext\r"), "line\\nnext\\r");
        assert!(matches!(escaped("clé\tvalue"), Cow::Borrowed(_)));
    }
}
