//! Lesson 10's failover for people: how the link was cut, what each server kept, and whether a 201 was lost.

use std::fmt::Write;

use super::style::{bad, dim, good, warn};
use super::table;
use crate::race::RaceResult;
use crate::race::{FailoverFigures, ServerCounts, Synchronous};

/// The failover's part of a race's report: empty without one.
pub fn render(r: &RaceResult) -> String {
    let (Some(f), Some(standby)) = (&r.failover, &r.standby) else {
        return String::new();
    };
    let mut out = String::new();
    let link = standby.link_delay_ms.unwrap_or(0);
    let untested = f.untested(standby.synchronous);
    let verdict = match (f.acknowledged_key_lost, untested) {
        (true, _) => bad(format!(
            "✗ worker {}'s acknowledged key lost",
            f.retried_worker
        )),
        // Asynchronous, and nothing was on the link when it was cut: the
        // key survived a failover that could lose nothing.
        (false, true) => warn(format!(
            "worker {}'s key kept, but untested: nothing was on the link when it was cut",
            f.retried_worker
        )),
        (false, false) => good(format!(
            "worker {}'s acknowledged key kept",
            f.retried_worker
        )),
    };
    let _ = writeln!(out, "  failover              {verdict}");
    let how = format!(
        "The standby's WAL crossed a relay of idem's that held it {link} ms, as a link \
         between two sites would, with commits waiting for {}. {:.0} ms into the race idem \
         cut the link, a network partition: {}. It promoted \
         the standby with pg_promote() ({:.0} ms), pointed a new pool at it, and sent \
         worker {}'s request again: {}{}",
        match standby.synchronous {
            Synchronous::Off => "the primary alone (asynchronous replication)",
            Synchronous::RemoteApply => {
                "the standby to apply them (synchronous_commit = remote_apply)"
            }
        },
        f.cut_after_ms,
        match f.wal_lost_bytes {
            0 => "no WAL was on it".to_string(),
            n => format!("{n} bytes of WAL on it never arrived"),
        },
        f.promote_ms,
        f.retried_worker,
        match f.acknowledged_key_lost {
            true => "the new primary had no key for it, so the work was done again.",
            false => "the new primary had its key, and the retry was answered from it.",
        },
        match untested {
            true =>
                " Nothing was on the link when it was cut: the race's WAL had crossed \
                     already, so this failover could lose nothing.",
            false => "",
        },
    );
    let wrapped = table::wrap_cell(&how, super::width::width().saturating_sub(4).max(20));
    for line in wrapped.lines() {
        let _ = writeln!(out, "    {}", dim(line));
    }
    for line in servers(f).lines() {
        let _ = writeln!(out, "    {line}");
    }
    out
}

/// One row per figure, one column per server.
fn servers(f: &FailoverFigures) -> String {
    let row = |name: &str, get: fn(&ServerCounts) -> u64| -> Vec<String> {
        vec![
            name.to_string(),
            get(&f.old_primary).to_string(),
            get(&f.promoted).to_string(),
            get(&f.new_primary).to_string(),
        ]
    };
    table::render(
        &["", "old primary", "promoted", "after the retry"],
        vec![
            row("key rows", |c| c.key_rows),
            row("pending key rows", |c| c.pending_key_rows),
            row("XP rows", |c| c.xp_rows),
        ],
        &[1, 2, 3],
    )
}
