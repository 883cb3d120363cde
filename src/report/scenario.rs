//! A scenario's verdict: each expectation with what the run showed, and a diff where they differ.

use std::fmt::Write;

use super::style::{bad, dim, good, strong};
use crate::scenario::Verdict;

/// The verdict beside the expectations, and a diff when any differs.
pub fn render_verdict(v: &Verdict) -> String {
    let mut out = String::new();
    let mark = if v.passed() {
        good("ok")
    } else {
        bad("FAILED")
    };
    let _ = writeln!(
        out,
        "{} {} {}",
        mark,
        strong(&v.title),
        dim(format!("· lesson {} · {}", v.lesson, v.source))
    );
    for c in &v.checks {
        let sign = if c.ok { good("✓") } else { bad("✗") };
        let _ = writeln!(
            out,
            "    {sign} {:<14} {:<28} {}",
            c.what,
            c.actual,
            dim(format!("expected {}", c.expected))
        );
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
