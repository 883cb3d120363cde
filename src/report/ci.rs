//! The probe's verdicts for CI systems: JUnit XML, and GitHub Actions' step summary and annotations.
//!
//! Both are made from the same [`Endpoint`]s as the terminal's summary.
//! Neither carries a timestamp or a host name, so two runs with the same
//! verdicts give the same report apart from the figures measured.

use std::fmt::Write;

use crate::probe::judged::{Case, Endpoint, Judged};

/// GitHub shows at most this many `::error` annotations of a step.
pub const MOST_ANNOTATIONS: usize = 10;

/// JUnit XML: a `<testsuite>` per endpoint, a `<testcase>` per case; a
/// failed case is a `<failure>` whose message is its figure, a case not
/// judged (or not run) is `<skipped>` with why, an endpoint that could not
/// be probed is one `<error>`.
pub fn junit(endpoints: &[Endpoint]) -> String {
    let count = |judged: &dyn Fn(&Case) -> bool| -> usize {
        endpoints
            .iter()
            .map(|e| e.cases.iter().filter(|c| judged(c)).count())
            .sum()
    };
    let tests = count(&|_| true);
    let failures = count(&|c| c.judged == Judged::Failed);
    let skipped = count(&|c| skips(c.judged));
    let errors = endpoints
        .iter()
        .filter(|e| e.could_not_run.is_some())
        .count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"idem probe\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" errors=\"{errors}\">",
        tests + errors
    );
    for e in endpoints {
        suite(&mut x, e);
    }
    x.push_str("</testsuites>\n");
    x
}

/// Whether a case is reported as skipped: asked for and not judged, or not run.
fn skips(judged: Judged) -> bool {
    matches!(
        judged,
        Judged::Unjudged | Judged::Undecided | Judged::NotApplicable
    )
}

fn suite(x: &mut String, e: &Endpoint) {
    let name = attr(&e.name);
    let failures = e
        .cases
        .iter()
        .filter(|c| c.judged == Judged::Failed)
        .count();
    let skipped = e.cases.iter().filter(|c| skips(c.judged)).count();
    let errors = usize::from(e.could_not_run.is_some());
    let _ = writeln!(
        x,
        "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" errors=\"{errors}\">",
        e.cases.len() + errors
    );
    if let Some(why) = &e.could_not_run {
        let _ = writeln!(
            x,
            "    <testcase name=\"the probe\" classname=\"{name}\">\n      <error message=\"{}\"/>\n    </testcase>",
            attr(why)
        );
    }
    for c in &e.cases {
        let _ = write!(
            x,
            "    <testcase name=\"{}\" classname=\"{name}\"",
            attr(&c.case)
        );
        let saw = attr(&c.saw);
        let _ = match c.judged {
            Judged::Held => writeln!(x, "/>"),
            Judged::Failed => writeln!(
                x,
                ">\n      <failure message=\"{saw}\">{saw}</failure>\n    </testcase>"
            ),
            other => writeln!(
                x,
                ">\n      <skipped message=\"{}: {saw}\"/>\n    </testcase>",
                other.name()
            ),
        };
    }
    x.push_str("  </testsuite>\n");
}

/// Text made safe for an XML attribute or element: markup escaped, and
/// control characters (which XML 1.0 cannot carry) written as `\u{..}`.
fn attr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The step summary: one Markdown table of every case, as the terminal's.
pub fn github_summary(endpoints: &[Endpoint]) -> String {
    let mut md =
        String::from("### idem probe\n\n| endpoint | case | verdict | saw |\n|---|---|---|---|\n");
    let cell = |t: &str| crate::controls::escaped(t).replace('|', "\\|");
    for e in endpoints {
        if let Some(why) = &e.could_not_run {
            let _ = writeln!(
                md,
                "| {} | the probe | could not run | {} |",
                cell(&e.name),
                cell(why)
            );
        }
        for c in &e.cases {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                cell(&e.name),
                cell(&c.case),
                c.judged.name(),
                cell(&c.saw)
            );
        }
    }
    md.push('\n');
    md
}

/// GitHub's workflow commands for what did not hold: at most
/// [`MOST_ANNOTATIONS`] `::error` lines, the rest summed up in one `::notice`.
pub fn github_annotations(endpoints: &[Endpoint]) -> String {
    let mut errors: Vec<String> = Vec::new();
    for e in endpoints {
        if let Some(why) = &e.could_not_run {
            errors.push(format!("{}: could not be probed: {why}", e.name));
        }
        for c in e.cases.iter().filter(|c| c.judged == Judged::Failed) {
            errors.push(format!("{}, {}: {}", e.name, c.case, c.saw));
        }
    }
    let mut out = String::new();
    for error in errors.iter().take(MOST_ANNOTATIONS) {
        let _ = writeln!(out, "::error title=idem probe::{}", command_data(error));
    }
    if errors.len() > MOST_ANNOTATIONS {
        let _ = writeln!(
            out,
            "::notice title=idem probe::{} more cases did not hold; see the step summary",
            errors.len() - MOST_ANNOTATIONS
        );
    }
    out
}

/// A workflow command's message, escaped as GitHub reads it (`%`, CR, LF).
fn command_data(text: &str) -> String {
    crate::controls::escaped(text)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(n_failed: usize) -> Endpoint {
        let mut cases = vec![Case::new("burst", Judged::Held, "1 effect")];
        for i in 0..n_failed {
            cases.push(Case::new(
                format!("case {i}"),
                Judged::Failed,
                "3 effects <for> \"one\" key",
            ));
        }
        cases.push(Case::new(
            "other caller",
            Judged::NotApplicable,
            "no --other-caller",
        ));
        Endpoint {
            name: "pay & go".into(),
            cases,
            could_not_run: None,
        }
    }

    #[test]
    fn junit_counts_and_escapes() {
        let x = junit(&[endpoint(2)]);
        assert!(
            x.contains("tests=\"4\" failures=\"2\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("name=\"pay &amp; go\""), "{x}");
        assert!(
            x.contains("3 effects &lt;for&gt; &quot;one&quot; key"),
            "{x}"
        );
        assert!(!x.contains('\u{1b}'));
    }

    #[test]
    fn github_caps_errors_at_ten_and_sums_up_the_rest() {
        let out = github_annotations(&[endpoint(12)]);
        assert_eq!(out.lines().filter(|l| l.starts_with("::error")).count(), 10);
        assert!(
            out.contains("::notice title=idem probe::2 more cases did not hold"),
            "{out}"
        );
    }
}
