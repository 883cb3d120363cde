//! One race for people: the settings, the row counts up front, why, and every worker.

use std::fmt::Write;

use super::explain::explain;
use super::style::{bad, dim, good, judged, strong, warn};
use super::table;
use crate::race::{Outcome, RaceResult, Transport, WorkerReport};
use crate::store::StoreKind;

/// The settings line, so that a screenshot explains itself.
pub fn settings_line(r: &RaceResult) -> String {
    settings_line_with(r, true)
}

/// The settings line without the loser policy, for a table of every policy.
pub fn settings_line_for_every_loser(r: &RaceResult) -> String {
    settings_line_with(r, false)
}

/// `pool 5 (runner holds 1)`: the pool and whether the runner holds one of it.
pub fn pool(size: usize, runner_holds_connection: bool) -> String {
    let runner = match runner_holds_connection {
        true => "runner holds 1",
        false => "runner holds none",
    };
    format!("pool {size} ({runner})")
}

fn settings_line_with(r: &RaceResult, show_loser: bool) -> String {
    let workers = match r.workers {
        1 => "1 worker".to_string(),
        n => format!("{n} workers"),
    };
    let mut items = vec![
        workers,
        pool(r.pool_size, r.runner_holds_connection),
        format!("work {} ms", r.work_ms),
    ];
    if r.via == crate::db::via::Via::Pgbouncer {
        items.push("through PgBouncer (transaction mode)".into());
    }
    if r.orm != crate::strategy::orm::Orm::Bare {
        items.push("ActiveRecord's statements".into());
    }
    if let Some(level) = r.isolation {
        let mut text = format!("one {} transaction per request", level.name());
        match r.retry_serialization {
            0 => {}
            1 => text.push_str(", 1 retry"),
            n => text.push_str(&format!(", {n} retries")),
        }
        items.push(text);
    }
    if let Some(loser) = r.loser_policy.filter(|_| show_loser) {
        items.push(format!("loser {}", loser.name()));
    }
    match (r.store, r.cache_pressure) {
        (StoreKind::Cache, 0) => items.push("claims in the cache".into()),
        (StoreKind::Cache, n) => {
            items.push("claims in the cache".into());
            items.push(format!("{n} other writes, then a retry"));
        }
        (_, 0) => {}
        (_, n) => items.push(format!("{n} other cache writes, then a retry")),
    }
    match (r.transport, r.threads) {
        (Transport::Http, Some(t)) if r.replicas > 1 => items.push(format!(
            "over HTTP, {} app processes of {t} threads and their own pool",
            r.replicas
        )),
        (Transport::Http, Some(t)) => items.push(format!("over HTTP, {t} app threads")),
        (Transport::Http, None) => items.push("over HTTP".into()),
        (Transport::InProcess, _) => {}
    }
    if let Some(standby) = &r.standby {
        let delay = match standby.apply_delay_ms {
            0 => String::new(),
            ms => format!(", applying {ms} ms late"),
        };
        let reads = match (standby.read_from, standby.yours) {
            (crate::race::ReadFrom::Standby, false) => "finds read from a hot standby",
            (crate::race::ReadFrom::Standby, true) => "finds read from your standby",
            (crate::race::ReadFrom::Primary, false) => "a hot standby beside it",
            (crate::race::ReadFrom::Primary, true) => "your standby beside it",
        };
        items.push(format!("{reads}{delay}"));
        if let Some(ms) = standby.link_delay_ms {
            items.push(format!("its WAL {ms} ms away"));
        }
        if standby.synchronous == crate::race::Synchronous::RemoteApply {
            items.push("commits wait for it (remote_apply)".into());
        }
    }
    items.push(format!("key {:?}", r.key));
    super::width::join_fitted(&items, super::width::width())
}

/// The full report of one race.
pub fn render(r: &RaceResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}",
        strong("idem race ·"),
        strong(r.strategy_label())
    );
    let _ = writeln!(out, "{}\n", dim(settings_line(r)));
    out.push_str(&figures(r));
    out.push('\n');
    let _ = writeln!(out, "{}\n", explain(r));
    out.push_str(&workers_table(&r.reports));
    out.push('\n');
    out
}

/// The three figures the lesson is about, big and first.
pub fn figures(r: &RaceResult) -> String {
    let right = r.xp_rows == r.expected_xp_rows;
    let dup = if r.duplicates == 0 {
        good("0  none")
    } else {
        bad(format!(
            "{}  ✗ the same work done {} times",
            r.duplicates, r.xp_rows
        ))
    };
    let key_note = if r.pending_key_rows > 0 {
        format!(
            "{} still pending: a claim nobody completed",
            r.pending_key_rows
        )
    } else if r.store == StoreKind::Cache {
        "the claims live in the cache store".to_string()
    } else if r.redis.is_some_and(|redis| redis.plan.fence) {
        "the claims live in Redis; the fence's row here".to_string()
    } else if r.store == StoreKind::Redis {
        "the claims live in Redis".to_string()
    } else if r.strategy.uses_key_table() {
        "the unique index allows one".to_string()
    } else {
        format!("{} keeps no key table", r.strategy)
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  idempotency key rows  {}   {}",
        strong(r.key_rows.to_string()),
        dim(key_note)
    );
    let _ = writeln!(
        out,
        "  XP rows               {}   {}",
        judged(r.xp_rows, right),
        dim(format!("expected {}", r.expected_xp_rows))
    );
    let _ = writeln!(out, "  duplicates            {dup}");
    let calls = calls_line(r, right);
    let _ = writeln!(out, "  service calls         {calls}");
    // After a crash, no XP row means the request's award was lost: the
    // client was never told, and no retry did the work.
    if r.crash.is_some() && r.xp_rows < r.expected_xp_rows {
        let lost = noted(
            &(r.expected_xp_rows - r.xp_rows).to_string(),
            "✗ the work was never done: the request's award is lost",
            |t| bad(t),
        );
        let _ = writeln!(out, "  lost work             {lost}");
    }
    if r.wrong_replays > 0 {
        let wrong = noted(
            &r.wrong_replays.to_string(),
            "✗ told \"success\" with another request's result (no fingerprint check)",
            |t| bad(t),
        );
        let _ = writeln!(out, "  wrong replays         {wrong}");
    }
    if let Some(standby) = &r.standby {
        // With an apply delay, pg_stat_replication's replay_lag is not
        // the delay a find meets (one run showed 25 ms beside a 200 ms
        // delay): the card says the delay the standby was given instead.
        let replay = match (standby.apply_delay_ms, standby.replay_lag_ms) {
            (0, Some(ms)) => format!("; replay lag {ms:.0} ms"),
            (0, None) => String::new(),
            (delay, _) => {
                format!("; each commit applied {delay} ms late (recovery_min_apply_delay)")
            }
        };
        let lag = noted(
            &standby.lag_bytes.to_string(),
            &format!("bytes of WAL behind at the end{replay}"),
            |t| dim(t),
        );
        let _ = writeln!(out, "  standby lag           {lag}");
    }
    out.push_str(&super::failover::render(r));
    out
}

/// One row per worker: what it waited, saw, did, and how it ended. Losers
/// that waited for the winner get the cost of waiting in extra columns, and
/// when the requests differ (or nothing checks what they asked) each one's
/// parameters and fingerprint are shown.
pub fn workers_table(reports: &[WorkerReport]) -> String {
    let waiting = reports.iter().any(|w| w.waited.is_some());
    let asking = reports.iter().any(|w| {
        w.params != reports[0].params
            || w.wrong_replay.is_some()
            || w.outcome == Outcome::Mismatch
            || w.fingerprint.is_none()
    });
    let rows = reports
        .iter()
        .map(|w| {
            let mut row = vec![
                if w.retry {
                    format!("{} retry", w.worker)
                } else {
                    w.worker.to_string()
                },
                format!("{:.1} ms", w.checkout_wait_ms),
                w.saw.clone(),
                w.did.clone(),
                outcome_cell(w.outcome, w.status),
                // A crashed worker answered nothing: no time to show.
                match w.outcome {
                    Outcome::Crashed | Outcome::HungUp => "—".to_string(),
                    _ => format!("{:.1} ms", w.answer_ms),
                },
            ];
            if waiting {
                row.extend(waiting_cells(w));
            }
            if asking {
                row.extend(asking_cells(w));
            }
            row
        })
        .collect();
    let mut header = vec![
        "worker",
        "checkout wait",
        "saw",
        "did",
        "outcome",
        "answered at",
    ];
    let mut right = vec![0, 1, 5];
    if waiting {
        right.extend([header.len(), header.len() + 1]);
        header.extend(["waited", "reads", "conn held", "blocked by"]);
    }
    if asking {
        right.push(header.len());
        header.extend(["asked", "fingerprint", "check"]);
    }
    table::render(&header, rows, &right)
}

fn asking_cells(w: &WorkerReport) -> [String; 3] {
    let fingerprint = w
        .fingerprint
        .as_deref()
        .map_or("not checked".to_string(), |f| f[..8].to_string());
    // The cell says whose answer it got; the figures above say what that means.
    let given = w
        .body
        .as_ref()
        .and_then(|b| b.get("amount"))
        .and_then(serde_json::Value::as_i64);
    let check = match (&w.wrong_replay, given) {
        (Some(_), Some(amount)) => bad(format!("✗ got the {amount} XP answer")).to_string(),
        (Some(wrong), None) => bad(format!("✗ {wrong}")).to_string(),
        (None, _) => String::new(),
    };
    [format!("{} XP", w.params.amount), fingerprint, check]
}

fn waiting_cells(w: &WorkerReport) -> [String; 4] {
    let Some(waited) = w.waited else {
        return Default::default();
    };
    let held = if waited.held_connection {
        warn("yes").to_string()
    } else {
        "no".to_string()
    };
    let by = w
        .blocked_by
        .iter()
        .map(|b| format!("worker {b}"))
        .collect::<Vec<_>>()
        .join(", ");
    [
        format!("{:.1} ms", waited.ms),
        waited.reads.to_string(),
        held,
        by,
    ]
}

/// An outcome with the HTTP status the client got, coloured by whether it
/// is a problem. (Over the wire a replay carries the first response's 201.)
pub fn outcome_cell(outcome: Outcome, status: u16) -> String {
    let status = match status {
        0 => "—".to_string(),
        code => code.to_string(),
    };
    let text = format!("{status} {}", outcome.name());
    match outcome {
        Outcome::Created | Outcome::Replayed => good(text).to_string(),
        Outcome::Conflict | Outcome::Mismatch => warn(text).to_string(),
        Outcome::Duplicate
        | Outcome::CheckoutTimeout
        | Outcome::Error
        | Outcome::Failed
        | Outcome::Crashed => bad(text).to_string(),
        Outcome::HungUp => warn(text).to_string(),
    }
}

/// The service calls, and whether they are more than the race meant:
/// a retry after a request cut off mid-work, or after a failed call whose
/// claim was released, calls again as it must.
fn calls_line(r: &RaceResult, right: bool) -> String {
    let failed_first = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Failed && !w.retry)
        .count() as u64;
    let n = r.service_calls;
    match n {
        0 => noted("0", "the work never ran", |t| dim(t)),
        1 => noted("1", "the work ran once", |t| dim(t)),
        n if failed_first > 0 && n <= 1 + failed_first && r.duplicates == 0 && right => noted(
            &n.to_string(),
            "as it must: the first call failed, its claim was released, and the retry \
             called again",
            |t| warn(t),
        ),
        n if n <= 1 + r.cut_off_after_work() && r.duplicates == 0 && right => noted(
            &n.to_string(),
            "as it must: a request cut off mid-work had already called, and no guard \
             takes a call back; a service that is idempotent itself, sent the same \
             key, would make the retry's call a replay",
            |t| warn(t),
        ),
        n => noted(
            &n.to_string(),
            &format!("✗ the work ran {n} times; no rollback undoes a call"),
            |t| bad(t),
        ),
    }
}

/// A figure's value and its note, the note wrapped to the terminal under
/// its own first line (the figures' values start at column 24).
fn noted(value: &str, note: &str, paint: fn(&str) -> colored::ColoredString) -> String {
    let indent = 24 + value.chars().count() + 2;
    let room = super::width::width().saturating_sub(indent).max(20);
    let lines: Vec<String> = table::wrap_cell(note, room)
        .lines()
        .map(|l| paint(l).to_string())
        .collect();
    format!(
        "{value}  {}",
        lines.join(&format!("\n{}", " ".repeat(indent)))
    )
}
