//! A scenario's verdict: each expectation with what the run showed, and a diff where they differ.

use std::fmt::Write;

use super::style::{bad, dim, good, strong, warn};
use crate::scenario::Verdict;

/// A verdict in one line when it passed (`✓ title · file`); in full when not.
pub fn render_verdict_line(v: &Verdict) -> String {
    if let Some(why) = &v.skipped {
        return skipped(v, why);
    }
    if !v.passed() {
        return render_verdict(v);
    }
    let name = v.source.rsplit('/').next().unwrap_or(&v.source);
    let file = format!(" · {name}");
    let fits = 3 + v.title.chars().count() + file.chars().count() <= super::width::width();
    let file = if fits {
        dim(file).to_string()
    } else {
        String::new()
    };
    format!("{} {}{file}\n", good("✓"), v.title)
}

/// A scenario that did not run, and why.
fn skipped(v: &Verdict, why: &str) -> String {
    format!("{} {}: {}\n", warn("skipped"), v.title, dim(why))
}

/// The verdict beside the expectations, and a diff when any differs.
pub fn render_verdict(v: &Verdict) -> String {
    if let Some(why) = &v.skipped {
        return skipped(v, why);
    }
    let mut out = String::new();
    let mark = if v.passed() {
        good("✓")
    } else {
        bad("FAILED")
    };
    let source = format!("· lesson {} · {}", v.lesson, v.source);
    let mark_w = if v.passed() { 1 } else { 6 };
    let screen = super::width::width();
    if mark_w + 1 + v.title.chars().count() + 1 + source.chars().count() <= screen {
        let _ = writeln!(out, "{} {} {}", mark, strong(&v.title), dim(source));
    } else {
        let _ = writeln!(out, "{} {}", mark, strong(&v.title));
        let alone = format!("lesson {} · {}", v.lesson, v.source);
        let _ = writeln!(out, "{}{}", " ".repeat(mark_w + 1), dim(alone));
    }
    // Three aligned columns: what, what was seen, what was expected. When
    // a line would not fit the screen, the expectation goes on the next
    // line, under what was seen.
    let what_w = v
        .checks
        .iter()
        .map(|c| c.what.chars().count())
        .max()
        .unwrap_or(0);
    let seen_w = v
        .checks
        .iter()
        .map(|c| c.actual.chars().count())
        .max()
        .unwrap_or(0);
    let screen = super::width::width();
    for c in &v.checks {
        let sign = if c.ok { good("✓") } else { bad("✗") };
        let expected = format!("expected {}", c.expected);
        let one_line = 6 + what_w + 1 + seen_w + 1 + expected.chars().count();
        if one_line <= screen {
            let _ = writeln!(
                out,
                "    {sign} {:<what_w$} {:<seen_w$} {}",
                c.what,
                c.actual,
                dim(expected)
            );
        } else {
            let under = " ".repeat(6 + what_w + 1);
            let _ = writeln!(out, "    {sign} {:<what_w$} {}", c.what, c.actual);
            let _ = writeln!(out, "{under}{}", dim(expected));
        }
    }
    if !v.passed() {
        let _ = writeln!(out, "    {}", dim("--- expected"));
        let _ = writeln!(out, "    {}", dim("+++ actual"));
        for c in v.checks.iter().filter(|c| !c.ok) {
            let _ = writeln!(out, "    {}", bad(format!("-{}: {}", c.what, c.expected)));
            let _ = writeln!(out, "    {}", good(format!("+{}: {}", c.what, c.actual)));
        }
    }
    out
}
