//! What `idem probe` prints: every request's answer, the status counts, the effects and a verdict.

use std::fmt::Write;

use super::style::{bad, dim, good, strong, warn};
use crate::probe::ProbeResult;
use crate::probe::bursts::Bursts;
use crate::probe::profile::{Agrees, Profile};
use crate::probe::release::{LOOSE, Release};
use crate::probe::schedule::Schedule;

pub use super::challenge::render_checks;

/// The probe's report, for people.
pub fn render(r: &ProbeResult) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} {} {} · {} requests at once · key {:?}\n",
        strong("idem probe ·"),
        r.method,
        strong(&r.url),
        r.requests,
        r.key
    );
    text.push_str(&super::table::render(
        &[
            "request",
            "status",
            "latency",
            "replayed",
            "body vs first success",
        ],
        shot_rows(r),
        &[2],
    ));
    let statuses = r
        .statuses
        .iter()
        .map(|(status, n)| format!("{status} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(text, "\n\n  statuses         {statuses}");
    let _ = writeln!(text, "  distinct bodies  {}", r.distinct_bodies);
    // Continued under itself, never inside one of its parts.
    let label = "  release          ";
    let release = release_line(
        &r.release,
        super::width::width().saturating_sub(label.len()),
    );
    let release = release.replace('\n', &format!("\n{}", " ".repeat(label.len())));
    let _ = writeln!(text, "{label}{release}");
    for note in &r.release.notes {
        let _ = writeln!(text, "                   {}", warn(note));
    }
    effects_line(&mut text, r);
    verdict_lines(&mut text, r);
    text.push('\n');
    text
}

/// A row per request: its status, latency, replay and body.
fn shot_rows(r: &ProbeResult) -> Vec<Vec<String>> {
    r.shots
        .iter()
        .map(|s| {
            let status = match (s.status, &s.error) {
                (Some(status), _) if (200..300).contains(&status) => {
                    good(status.to_string()).to_string()
                }
                (Some(status), _) if status >= 500 => bad(status.to_string()).to_string(),
                (Some(status), _) => warn(status.to_string()).to_string(),
                (None, Some(error)) => bad(format!("none: {error}")).to_string(),
                (None, None) => bad("none").to_string(),
            };
            let same = match s.same_as_first_success {
                _ if s.first_success => "the first".to_string(),
                Some(true) => "same".to_string(),
                Some(false) => "different".to_string(),
                None => "—".to_string(),
            };
            vec![
                s.request.to_string(),
                status,
                format!("{:.1} ms", s.latency_ms),
                if s.replayed {
                    "yes".into()
                } else {
                    "—".into()
                },
                same,
            ]
        })
        .collect()
}

/// Where the effects were counted, in words.
fn counted(r: &ProbeResult) -> &'static str {
    counted_words(r.counted_by)
}

/// Where effects were counted (`counted_by`), in words.
pub fn counted_words(place: Option<&str>) -> &'static str {
    match place {
        Some("sink") => "calls to the sink",
        Some("count_cmd") => "counted by --count-cmd",
        Some(_) => "counted by --count-sql",
        None => "not counted",
    }
}

/// The effects the count saw, a duplicate in red.
fn effects_line(text: &mut String, r: &ProbeResult) {
    match r.effects {
        Some(e) if e.effects > 1 => {
            let _ = writeln!(
                text,
                "  effects          {} {}",
                bad(e.effects.to_string()),
                bad(format!(
                    "✗ duplicate: {} for one key ({} before, {} after, {})",
                    e.effects,
                    e.before,
                    e.after,
                    counted(r)
                ))
            );
        }
        Some(e) => {
            let _ = writeln!(
                text,
                "  effects          {} {}",
                good(e.effects.to_string()),
                dim(format!(
                    "({} before, {} after, {})",
                    e.before,
                    e.after,
                    counted(r)
                ))
            );
        }
        None => {
            let _ = writeln!(
                text,
                "  effects          {}",
                dim("not counted (--count-sql)")
            );
        }
    }
}

/// The verdict, and a warning when a guard held under a loose release.
fn verdict_lines(text: &mut String, r: &ProbeResult) {
    let verdict = match r.verdict.held {
        Some(true) => good(&r.verdict.summary).to_string(),
        Some(false) => bad(&r.verdict.summary).to_string(),
        None => warn(&r.verdict.summary).to_string(),
    };
    let _ = writeln!(text, "\n{verdict}");
    if r.verdict.held == Some(true) && r.release.loose() {
        let _ = writeln!(
            text,
            "{}",
            warn(format!(
                "the release was looser than {} ms: a guard that held here may still fail a tighter race",
                LOOSE.as_millis()
            ))
        );
    }
}

/// `last byte · HTTP/1.1 over TLS · final writes 38 µs apart`, a new line
/// begun only between its parts when it is wider than `width`.
pub fn release_line(r: &Release, width: usize) -> String {
    let over = match (r.tls, r.verified) {
        (false, _) => String::new(),
        (true, true) => " over TLS".to_owned(),
        (true, false) => " over TLS (certificate not checked: --insecure)".to_owned(),
    };
    let spread = match r.final_writes {
        Some(1) => format!(
            "all final frames in one write, queued {:.0} µs apart",
            r.spread_us
        ),
        Some(n) => format!("final frames in {n} writes, {:.0} µs apart", r.spread_us),
        None => format!("final writes {:.0} µs apart", r.spread_us),
    };
    let items = [
        r.mode.name().to_string(),
        format!("{}{over}", r.protocol.name()),
        format!("{} sent", r.sent),
        dim(spread).to_string(),
    ];
    super::width::join_fitted(&items, width)
}

/// What `idem probe --runs R` came to, for people.
pub fn render_bursts(url: &str, b: &Bursts) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} {} · {} bursts of {} requests\n",
        strong("idem probe ·"),
        strong(url),
        b.bursts,
        b.requests_per_burst
    );
    let rate = b.rate();
    let rate = match b.with_duplicates {
        0 => good(rate).to_string(),
        _ => bad(rate).to_string(),
    };
    let _ = writeln!(
        text,
        "  {rate} {}",
        dim(match b.unjudged {
            0 => format!("(held in {}, undecided in {})", b.held, b.undecided),
            n => format!(
                "(held in {}, undecided in {}, not judged in {n})",
                b.held, b.undecided
            ),
        })
    );
    if !b.effects.is_empty() {
        let effects = b
            .effects
            .iter()
            .map(|(effects, bursts)| format!("{effects} in {bursts}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(text, "  effects per burst  {effects}");
    }
    let statuses = b
        .statuses
        .iter()
        .map(|(status, n)| format!("{status} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(text, "  statuses           {statuses}");
    if let Some(mode) = b.mode {
        let _ = writeln!(
            text,
            "  release            {} · final writes {:.0} µs apart (median), {:.0} µs at most",
            mode.name(),
            b.spread_us_median,
            b.spread_us_max
        );
    }
    text.push('\n');
    text
}

/// A `--retry-at` schedule: the first send, each retry at its offset, and
/// the effects left for the key.
pub fn render_schedule(s: &Schedule) -> String {
    let mut text = String::new();
    let first: Vec<String> = s
        .first_statuses
        .iter()
        .map(|st| st.map_or("no answer".into(), |st| st.to_string()))
        .collect();
    let _ = writeln!(
        text,
        "{} key {:?} · first {} · then {} retries\n",
        strong("idem probe · retry schedule ·"),
        s.key,
        first.join(", "),
        s.steps.len()
    );
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let rows = s
        .steps
        .iter()
        .map(|step| {
            vec![
                format!("{} ms", step.offset_ms),
                step.status.map_or_else(
                    || step.error.clone().unwrap_or("no answer".into()),
                    |st| st.to_string(),
                ),
                yes_no(step.replayed).to_string(),
                step.same_body
                    .map_or("—".into(), |same| yes_no(same).to_string()),
                step.effects_so_far.map_or("—".into(), |e| e.to_string()),
            ]
        })
        .collect();
    text.push_str(&super::table::render(
        &[
            "sent at",
            "status",
            "replayed",
            "first's body",
            "effects so far",
        ],
        rows,
        &[0, 4],
    ));
    let verdict = match (s.held, s.effects) {
        (Some(true), _) => good("held: one effect for the key").to_string(),
        (Some(false), Some(n)) => bad(format!(
            "duplicate: {n} effects for one key; {}",
            whose_work(s)
        ))
        .to_string(),
        _ => warn("not judged: no effect was counted for the key").to_string(),
    };
    let _ = writeln!(text, "\n{verdict}");
    text
}

/// Which sends of a schedule did the work again, read off its rows: the
/// retries answered without a replay, or (when every retry replayed) the
/// first send's burst.
fn whose_work(s: &Schedule) -> String {
    let worked: Vec<String> = s
        .steps
        .iter()
        .filter(|st| !st.replayed && st.status.is_some_and(|c| (200..300).contains(&c)))
        .map(|st| format!("{} ms", st.offset_ms))
        .collect();
    match (worked.as_slice(), s.requests) {
        ([], 1) => "no retry was answered without a replay: the first request's own work made them"
            .to_string(),
        ([], n) => {
            format!("every retry was a replay: they came from the first send, {n} requests at once")
        }
        ([one], _) => {
            format!("the retry sent at {one} was answered without a replay: it ran the work again")
        }
        (many, _) => format!(
            "the retries sent at {} were answered without a replay: they ran the work again",
            many.join(", ")
        ),
    }
}

/// The profile under the conformance table: each point, what the API
/// answered, and whether that is what the draft and Stripe document.
pub fn render_profile(p: &Profile) -> String {
    let agrees = |says: &str, a: Agrees| match a {
        Agrees::Matches => format!("{} {says}", good("✓")),
        Agrees::Differs => format!("{} {says}", warn("✗")),
        Agrees::Silent => dim("—").to_string(),
        Agrees::Unknown => format!("{} {says}", dim("?")),
    };
    let rows = p
        .profile
        .iter()
        .map(|point| {
            vec![
                point.point.to_string(),
                point.observed.clone(),
                agrees(point.draft_says, point.draft),
                agrees(point.stripe_says, point.stripe),
            ]
        })
        .collect();
    let (draft, of_draft) = p.matching(|point| point.draft);
    let (stripe, of_stripe) = p.matching(|point| point.stripe);
    format!(
        "\n{}\n\n{}\n\nmatches the draft on {draft} of {of_draft} points observed, Stripe on \
         {stripe} of {of_stripe} (✓ as documented, ✗ otherwise, ? not observed, — not \
         documented)\n{}\n",
        strong("profile: what it answered, beside what is documented"),
        super::table::render(&["point", "it answered", "IETF draft", "Stripe"], rows, &[]),
        dim(format!("draft: {}\nStripe: {}", p.draft, p.stripe)),
    )
}

/// A plan's summary: every endpoint's cases, one row each, and the counts.
pub fn render_plan(endpoints: &[crate::probe::judged::Endpoint]) -> String {
    use crate::probe::judged::Judged;
    let mut rows = Vec::new();
    for e in endpoints {
        if let Some(why) = &e.could_not_run {
            rows.push(vec![
                e.name.clone(),
                "the probe".into(),
                bad("could not run").to_string(),
                why.clone(),
            ]);
        }
        for c in &e.cases {
            let verdict = match c.judged {
                Judged::Held => good(c.judged.name()).to_string(),
                Judged::Failed => bad(c.judged.name()).to_string(),
                Judged::Unjudged => warn(c.judged.name()).to_string(),
                Judged::Undecided | Judged::NotApplicable => dim(c.judged.name()).to_string(),
            };
            rows.push(vec![e.name.clone(), c.case.clone(), verdict, c.saw.clone()]);
        }
    }
    format!(
        "\n{}\n\n{}\n\n{}\n",
        strong("the plan"),
        super::table::render(&["endpoint", "case", "verdict", "saw"], rows, &[]),
        plan_counts(endpoints),
    )
}

/// "15 cases: 9 held, 5 failed, 0 not judged, 0 undecided, 1 n/a; 0 of
/// 3 endpoints could not run": each verdict counted off the cases, every
/// verdict there is (so the parts always make the whole), the whole
/// counted apart and held to their sum.
fn plan_counts(endpoints: &[crate::probe::judged::Endpoint]) -> String {
    use crate::probe::judged::Judged;
    let cases: Vec<Judged> = endpoints
        .iter()
        .flat_map(|e| e.cases.iter().map(|c| c.judged))
        .collect();
    let parts: Vec<(usize, Judged)> = Judged::ALL
        .iter()
        .map(|j| (cases.iter().filter(|c| *c == j).count(), *j))
        .collect();
    let summed: usize = parts.iter().map(|(n, _)| n).sum();
    debug_assert_eq!(
        summed,
        cases.len(),
        "a plan's verdicts do not make its cases"
    );
    let parts = parts
        .iter()
        .map(|(n, j)| format!("{n} {}", j.name()))
        .collect::<Vec<_>>()
        .join(", ");
    let unrun = endpoints
        .iter()
        .filter(|e| e.could_not_run.is_some())
        .count();
    format!(
        "{} cases: {parts}; {unrun} of {} endpoints could not run",
        cases.len(),
        endpoints.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::judged::{Case, Endpoint, Judged};

    /// The summary's sentence against the table above it: each count it
    /// states is the number of rows with that verdict, and the cases and
    /// endpoints it names are the table's.
    #[test]
    fn a_plan_s_summary_counts_what_its_table_shows() {
        colored::control::set_override(false);
        let verdicts = [
            Judged::Held,
            Judged::Held,
            Judged::Failed,
            Judged::Unjudged,
            Judged::Undecided,
            Judged::NotApplicable,
            Judged::NotApplicable,
        ];
        let endpoints = vec![
            Endpoint {
                name: "award".into(),
                cases: verdicts
                    .iter()
                    .enumerate()
                    .map(|(i, j)| Case::new(format!("case {i}"), *j, "saw"))
                    .collect(),
                could_not_run: None,
            },
            Endpoint {
                name: "refund".into(),
                cases: Vec::new(),
                could_not_run: Some("the service never answered".into()),
            },
        ];
        let text = render_plan(&endpoints);
        let summary = text.lines().rev().find(|l| l.contains(" cases: ")).unwrap();
        let cell = |verdict: &str| {
            text.lines()
                .filter(|l| l.split('│').nth(3).is_some_and(|c| c.trim() == verdict))
                .count()
        };
        for j in verdicts {
            assert!(
                summary.contains(&format!("{} {}", cell(j.name()), j.name())),
                "{} rows say {}: {summary}",
                cell(j.name()),
                j.name()
            );
        }
        let cases = Judged::ALL.iter().map(|j| cell(j.name())).sum::<usize>();
        assert!(
            summary.starts_with(&format!("{cases} cases: ")),
            "{summary}"
        );
        assert!(
            summary.ends_with(&format!(
                "{} of 2 endpoints could not run",
                cell("could not run")
            )),
            "{summary}"
        );
    }
}
