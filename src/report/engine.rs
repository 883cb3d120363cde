//! A race on another engine (MariaDB), as a person reads it: the settings, the rows beside the lesson's figure, what each worker was told, and the server's errors by number and SQLSTATE.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::style::{dim, strong, warn};
use super::table;
use crate::race::engine::Engine;
use crate::race::mariadb::EngineResult;
use crate::race::options::{RetryNode, Spread};
use crate::request::Outcome;
use crate::strategy::StrategyKind;

/// One race's card.
pub fn render(r: &EngineResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{}", strong(title(r)));
    let _ = writeln!(out, "{}", dim(settings_line(r)));
    // A crash asked for and not seen is said, not left for the reader to
    // take the race for one that recovered.
    if r.race.crash.is_some() && !r.reports.iter().any(|w| w.outcome == Outcome::Crashed) {
        let _ = writeln!(
            out,
            "{}",
            warn(format!(
                "the crash planned never struck: {} reached no such point",
                r.race.strategy.spec().name
            ))
        );
    }
    out.push('\n');
    let figures = figures_of(r);
    out.push_str(&table::render(&["figure", "value"], figures, &[]));
    out.push('\n');
    let rows = r
        .reports
        .iter()
        .map(|w| {
            vec![
                match (w.retry, w.node) {
                    (true, _) => format!("{} retry", w.worker),
                    (false, Some(node)) => format!("{} @{node}", w.worker),
                    (false, None) => w.worker.to_string(),
                },
                format!("{:.1} ms", w.checkout_wait_ms),
                w.saw.clone(),
                w.did.clone(),
                format!("{} {}", status(w.status), w.outcome.name()),
                format!("{:.1} ms", w.answer_ms),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "worker",
            "checkout wait",
            "saw",
            "did",
            "outcome",
            "answered at",
        ],
        rows,
        &[0, 1, 5],
    ));
    out.push('\n');
    out
}

/// The figure table's rows: claims, rows, calls, outcomes, errors, and on
/// a cluster what certification refused and what was left.
fn figures_of(r: &EngineResult) -> Vec<Vec<String>> {
    let claims = match r.race.store {
        crate::store::StoreKind::Table => vec!["key rows".into(), r.key_rows.to_string()],
        crate::store::StoreKind::Cache => vec!["cache entries".into(), r.cache_entries.to_string()],
        crate::store::StoreKind::Redis => vec!["key rows".into(), r.key_rows.to_string()],
    };
    let mut figures = vec![
        claims,
        vec![
            "XP rows".into(),
            format!("{} (the lesson's figure: {})", r.xp_rows, r.lesson_figure),
        ],
        vec!["service calls".into(), r.service_calls.to_string()],
        vec!["outcomes".into(), counted(&r.outcomes)],
        vec![
            "server errors".into(),
            match r.errors.is_empty() {
                true => "none".into(),
                false => counted(&r.errors),
            },
        ],
    ];
    if let Some(c) = r.cluster_counters {
        figures.push(vec![
            "certification".into(),
            format!(
                "{} failed at COMMIT, {} brute-force aborts, {} replayed",
                c.cert_failures, c.bf_aborts, c.replays
            ),
        ]);
    }
    if let Some(held) = &r.retry_node_held {
        use crate::race::mariadb::behind::Held;
        figures.push(vec![
            "retry's node".into(),
            match held {
                Held::Waited => "held behind; the retry waited for it".into(),
                Held::Answered => "held behind; the retry answered from it as it was".into(),
                Held::NotMade(why) => format!("could not be held behind: {why}"),
            },
        ]);
    }
    if let Some(after) = &r.cluster_after {
        let size = crate::race::told::counted(after.size, "node");
        figures.push(vec![
            "cluster after".into(),
            format!("{size}, {}", after.status),
        ]);
    }
    figures
}

/// `--trace`: every step of every request, in the order they ended, with
/// its time, what it found or did, and with `sql` its statement.
pub fn render_steps(r: &EngineResult, sql: bool) -> String {
    let mut steps: Vec<(String, &crate::request::StepEvent)> = r
        .reports
        .iter()
        .flat_map(|w| {
            let who = match w.retry {
                true => format!("{} retry", w.worker),
                false => w.worker.to_string(),
            };
            w.steps.iter().map(move |e| (who.clone(), e))
        })
        .collect();
    steps.sort_by(|a, b| a.1.end_ms.total_cmp(&b.1.end_ms));
    let rows = steps
        .iter()
        .map(|(who, e)| {
            let mut row = vec![
                format!("{:.1}–{:.1} ms", e.start_ms, e.end_ms),
                who.clone(),
                e.step.name().to_string(),
                e.note.clone(),
            ];
            if sql {
                row.push(
                    e.sql
                        .unwrap_or("")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
            row
        })
        .collect();
    let mut header = vec!["when", "worker", "step", "what it found or did"];
    if sql {
        header.push("statement");
    }
    format!(
        "\n{}\n{}",
        strong("every step, in the order they ended"),
        table::render(&header, rows, &[])
    )
}

/// "check-then-store on MariaDB 10.11.19 (InnoDB)", or on a cluster "…
/// on a Galera cluster of 3 MariaDB 10.11.19 nodes (InnoDB)".
fn title(r: &EngineResult) -> String {
    let version = r.server_version.split('-').next().unwrap_or("");
    let strategy =
        crate::strategy::guard_file::label(r.race.strategy, r.race.strategy_file.as_deref());
    let server = r.engine.spec().server;
    match r.race.cluster.is_cluster() {
        true => format!(
            "{strategy} on a Galera cluster of {} {server} {version} nodes (InnoDB)",
            r.race.cluster.nodes
        ),
        false => format!("{strategy} on {server} {version} (InnoDB)"),
    }
}

/// The race's settings in one line, as the PostgreSQL card gives them.
pub fn settings_line(r: &EngineResult) -> String {
    let runner = match r.race.runner_holds_connection {
        true => " (the runner holds one)",
        false => "",
    };
    let transaction = match (r.race.isolation, r.race.cache_isolation) {
        (Some(level), _) => format!("in the request's transaction at {}", level.name()),
        (None, Some(level)) => format!(
            "claims in the cache, each written unless it exists in a transaction at {}",
            level.name()
        ),
        (None, None) => "each statement committing on its own".into(),
    };
    let crash = match r.race.crash {
        Some(plan) => {
            use crate::request::fault::FaultPoint;
            let at = match plan.at {
                FaultPoint::AfterClaim => "after the claim (or the find)",
                FaultPoint::DuringWork => "halfway through the work",
                FaultPoint::BeforeComplete => "before the completion (or the store)",
            };
            let stale = r.race.stale_after_ms;
            format!(", a crash {at}, stale-claim age {stale} ms")
        }
        None => String::new(),
    };
    let read_back = match r.race.read_back {
        Some(how) => format!(", the claim as find-or-create, read back {}", how.name()),
        None => String::new(),
    };
    let pool = match (r.race.cluster.is_cluster(), r.race.cluster.spread) {
        (false, _) => format!("pool of {}{runner}", r.race.pool_size),
        (true, Spread::OneNode) => format!(
            "every request to node 1, pool of {}{runner}",
            r.race.pool_size
        ),
        (true, Spread::RoundRobin) => format!(
            "requests spread round-robin, a pool of {} on each node{runner}",
            r.race.pool_size
        ),
    };
    let killed = match r.race.cluster.kill_node {
        Some(n) => format!(", node {n} killed halfway through the work"),
        None => String::new(),
    };
    let c = r.race.cluster;
    let retrying = match (c.retry_at_once, c.retry_node) {
        (false, _) => "",
        (true, RetryNode::Other) => ", each client retrying at once on the next node",
        (true, RetryNode::Same) => ", each client retrying at once on its first node",
    };
    let causal = match c.sync_wait {
        true => ", causal reads (wsrep_sync_wait = 1)",
        false => "",
    };
    let cluster = format!("{retrying}{causal}");
    format!(
        "{}, {pool}, work {} ms, {transaction}{read_back}{crash}{cluster}{killed}",
        crate::race::told::counted(r.race.workers as u64, "worker"),
        r.race.work_ms
    )
}

fn status(status: u16) -> String {
    match status {
        0 => "—".into(),
        s => s.to_string(),
    }
}

/// "created 1, duplicate 3".
pub fn counted<K: std::fmt::Display, V: std::fmt::Display>(counts: &BTreeMap<K, V>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One row of the table: what the runs of one strategy on one engine showed.
pub struct EngineRow {
    pub strategy: StrategyKind,
    pub engine: Engine,
    pub xp_rows: BTreeMap<u64, u64>,
    pub service_calls: BTreeMap<u64, u64>,
    /// Server errors met over the runs, as each engine names them.
    pub errors: BTreeMap<String, u64>,
    /// Why the strategy did not run on this engine.
    pub left_out: Option<&'static str>,
}

impl EngineRow {
    pub fn new(strategy: StrategyKind, engine: Engine) -> Self {
        Self {
            strategy,
            engine,
            xp_rows: BTreeMap::new(),
            service_calls: BTreeMap::new(),
            errors: BTreeMap::new(),
            left_out: None,
        }
    }

    pub fn add(&mut self, xp_rows: u64, calls: u64, errors: impl Iterator<Item = String>) {
        *self.xp_rows.entry(xp_rows).or_insert(0) += 1;
        *self.service_calls.entry(calls).or_insert(0) += 1;
        for e in errors {
            *self.errors.entry(e).or_insert(0) += 1;
        }
    }
}

/// `idem compare --engine ...`: each strategy's rows on each engine, one
/// under the other.
pub fn render_compare(rows: &[EngineRow], settings_line: &str, runs: u64) -> String {
    use crate::race::histogram;
    let mut out = String::new();
    let each = match runs {
        1 => String::new(),
        n => format!(" · {n} runs each"),
    };
    let _ = writeln!(
        out,
        "{}",
        strong(format!("idem compare, engine by engine{each}"))
    );
    let _ = writeln!(out, "{}\n", dim(settings_line));
    let mut last = None;
    let body = rows
        .iter()
        .map(|r| {
            // The strategy's name once, on its first engine's row.
            let name = match last.replace(r.strategy) == Some(r.strategy) {
                true => String::new(),
                false => r.strategy.spec().name.to_string(),
            };
            let server = r.engine.spec().server.to_string();
            if let Some(why) = r.left_out {
                return vec![
                    name,
                    server,
                    dim(format!("not run: {why}")).to_string(),
                    String::new(),
                    String::new(),
                ];
            }
            let errors = match r.errors.is_empty() {
                true => "none".to_string(),
                false => r
                    .errors
                    .iter()
                    .map(|(e, n)| format!("{e} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            vec![
                name,
                server,
                histogram(&r.xp_rows),
                histogram(&r.service_calls),
                errors,
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "strategy",
            "engine",
            "XP rows",
            "calls",
            "server errors met",
        ],
        body,
        &[],
    ));
    out.push('\n');
    out
}

/// Many races' XP rows: how often each figure came.
pub fn render_runs(results: &[EngineResult]) -> String {
    let Some(first) = results.first() else {
        return String::new();
    };
    let mut seen: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for r in results {
        *seen.entry((r.xp_rows, r.service_calls)).or_insert(0) += 1;
        for (e, n) in &r.errors {
            *errors.entry(e.clone()).or_insert(0) += n;
        }
    }
    let n = results.len();
    let rows = seen
        .iter()
        .map(|((rows, calls), runs)| {
            let mark = match *rows == first.lesson_figure {
                true => "  ← the lesson's figure",
                false => "",
            };
            vec![
                rows.to_string(),
                calls.to_string(),
                format!("{runs} of {n}{mark}"),
            ]
        })
        .collect();
    let mut out = format!(
        "\n{}\n{}\n\n",
        strong(title(first)),
        dim(settings_line(first))
    );
    out.push_str(&table::render(
        &["XP rows", "service calls", "runs"],
        rows,
        &[0, 1],
    ));
    out.push('\n');
    if !errors.is_empty() {
        let _ = writeln!(out, "server errors over the {n} runs: {}", counted(&errors));
    }
    out
}
