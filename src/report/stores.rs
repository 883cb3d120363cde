//! Lesson 5 for people: the audit of one key, the reaper's work, and the two stores side by side.

use std::fmt::Write;

use super::style::{bad, dim, good, strong};
use super::table;
use crate::race::stores::StoreFigures;
use crate::race::xp_rows;
use crate::store::audit::Audit;
use crate::store::reap::Reaped;

/// What each store can still say about the key.
pub fn render_audit(a: &Audit) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{} {:?}", strong("audit of key"), a.key);
    match &a.table {
        Some(t) => {
            let _ = writeln!(
                out,
                "  key table: {}",
                good(format!("{} facts", a.table_facts()))
            );
            let mut fact = |name: &str, value: String| {
                let _ = writeln!(out, "    {name:<13} {value}");
            };
            fact(
                "claimed by",
                t.worker.map_or("?".into(), |w| format!("worker {w}")),
            );
            fact("status", t.status.clone());
            fact("claimed at", t.created_at.clone());
            fact(
                "completed at",
                t.completed_at.clone().unwrap_or_else(|| "—".into()),
            );
            fact(
                "took",
                t.took_ms.map_or("—".into(), |ms| format!("{ms:.1} ms")),
            );
            fact(
                "fingerprint",
                t.fingerprint.clone().unwrap_or_else(|| "—".into()),
            );
            fact(
                "response",
                format!(
                    "{} {}",
                    t.response_code.map_or("—".into(), |c| c.to_string()),
                    t.response_body.clone().unwrap_or_default()
                ),
            );
        }
        None => {
            let _ = writeln!(out, "  key table: {}", dim("no row for this key"));
        }
    }
    match &a.cache {
        Some(c) => {
            let _ = writeln!(
                out,
                "  cache:     {} bytes written at {}, value {}… {}",
                c.byte_size,
                c.created_at,
                c.value_prefix,
                dim("(an opaque blob: no history, no who, no how long)")
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  cache:     {}",
                dim("no entry (never written, expired or evicted)")
            );
        }
    }
    out
}

/// What `idem reap` removed and kept.
pub fn render_reap(r: &Reaped, seeded: bool) -> String {
    let mut out = String::new();
    let hours = |v: &[f64]| {
        v.iter()
            .map(|h| format!("{h:.0}h"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        out,
        "{}",
        strong(format!("idem reap --older-than {}h", r.older_than_s / 3600))
    );
    if seeded {
        let _ = writeln!(
            out,
            "{}",
            dim("a fresh database: seeded completed keys of several ages and stale pending claims")
        );
    }
    let _ = writeln!(
        out,
        "  removed  {:>3} completed keys  {}",
        r.removed_hours.len(),
        dim(hours(&r.removed_hours))
    );
    let _ = writeln!(
        out,
        "  kept     {:>3} completed keys  {}",
        r.kept_hours.len(),
        dim(hours(&r.kept_hours))
    );
    let _ = writeln!(
        out,
        "  kept     {:>3} pending claims  {}",
        r.pending_kept,
        dim("(a stale claim is recovered, not reaped)")
    );
    out
}

/// `idem stores`: the table store and the cache store side by side.
pub fn render_stores(rows: &[StoreFigures]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        strong("idem stores · where the reservation lives")
    );
    if let Some(first) = rows.first() {
        let _ = writeln!(
            out,
            "{}\n",
            dim(format!(
                "claim-work-complete · {} workers · {} races per store · cache limit {} entries",
                first.workers, first.runs, first.cache_max_entries
            ))
        );
    }
    let body = rows
        .iter()
        .map(|r| {
            let dup = format!("{} of {}", r.runs_with_duplicates, r.runs);
            let dup = if r.runs_with_duplicates == 0 {
                good(dup)
            } else {
                bad(dup)
            };
            let retry = format!("{} ({})", r.retry_answer, xp_rows(r.xp_rows_after_retry));
            let retry = if r.survives_eviction {
                good(retry)
            } else {
                bad(retry)
            };
            vec![
                r.store.to_string(),
                dup.to_string(),
                retry.to_string(),
                r.audit.clone(),
                r.expiry.to_string(),
                format!("{:.2} ms", r.ms_per_request),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "store",
            "races with duplicates",
            "retry after other traffic",
            "audit",
            "expiry",
            "per request",
        ],
        body,
        &[5],
    ));
    out.push('\n');
    out
}
