//! What `idem probe` prints: every request's answer, the status counts, the effects and a verdict.

use std::fmt::Write;

use super::style::{bad, dim, good, strong, warn};
use crate::probe::ProbeResult;
use crate::probe::release::{LOOSE, Release};

pub use super::challenge::render_checks;

/// The probe's report, for people.
pub fn render(r: &ProbeResult) -> String {
    let rows = r
        .shots
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
        .collect();
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
        rows,
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
    let _ = writeln!(text, "  release          {}", release_line(&r.release));
    for note in &r.release.notes {
        let _ = writeln!(text, "                   {}", warn(note));
    }
    match r.effects {
        Some(e) if e.effects > 1 => {
            let _ = writeln!(
                text,
                "  effects          {} {}",
                bad(e.effects.to_string()),
                bad(format!(
                    "✗ duplicate: {} for one key ({} before, {} after)",
                    e.effects, e.before, e.after
                ))
            );
        }
        Some(e) => {
            let _ = writeln!(
                text,
                "  effects          {} {}",
                good(e.effects.to_string()),
                dim(format!("({} before, {} after)", e.before, e.after))
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
    text.push('\n');
    text
}

/// `last byte · HTTP/1.1 over TLS · final writes 38 µs apart`
pub fn release_line(r: &Release) -> String {
    let over = match (r.tls, r.verified) {
        (false, _) => String::new(),
        (true, true) => " over TLS".to_owned(),
        (true, false) => " over TLS (certificate not checked: --insecure)".to_owned(),
    };
    let spread = match r.final_writes {
        Some(1) => format!("all final frames in one write, queued {:.0} µs apart", r.spread_us),
        Some(n) => format!("final frames in {n} writes, {:.0} µs apart", r.spread_us),
        None => format!("final writes {:.0} µs apart", r.spread_us),
    };
    format!(
        "{} · {}{over} · {} sent · {}",
        r.mode.name(),
        r.protocol.name(),
        r.sent,
        dim(spread)
    )
}
