//! `idem explore` for people: how many interleavings there are and how many ran, in how many the guard held and failed (by kind), and the shortest failing one drawn as `idem step` draws a schedule, with the command that replays it.

use std::fmt::Write;

use super::style::{bad, dim, good, strong, warn};
use crate::explore::{Exploration, Failure, switches};

pub fn render(e: &Exploration) -> String {
    let mut out = String::new();
    let name = crate::strategy::guard_file::label(e.strategy, e.strategy_file);
    let on = match (e.engine, e.nodes) {
        (crate::race::engine::Engine::Postgres, _) => String::new(),
        (engine, Some(n)) => format!(
            " · on a Galera cluster of {n} {} nodes",
            engine.spec().server
        ),
        (engine, None) => format!(" · on {}", engine.spec().server),
    };
    let _ = writeln!(
        out,
        "{}",
        strong(format!("idem explore · {name} · {} workers{on}", e.workers))
    );
    let space = match (e.total, e.reduced) {
        (Some(total), false) => format!("{} of {total} explored: every one", e.interleavings),
        (Some(total), true) => format!(
            "{} of {total} explored: every order of the steps that touch a row another \
             request uses, each standing for the orders of the rest (checkout, begin, work)",
            e.interleavings
        ),
        (None, _) => format!(
            "{} explored, the bound (--max-interleavings); there are more, not run",
            e.interleavings
        ),
    };
    let _ = writeln!(out, "  interleavings  {space}");
    let _ = writeln!(
        out,
        "  {}",
        dim(format!(
            "each from fresh tables, one step at a time; {:.0} ms each",
            e.ms_per_interleaving
        ))
    );
    if let Some(branches) = branches(e.branches, e.store) {
        let _ = writeln!(out, "  {}", dim(format!("also branched on {branches}")));
    }
    let _ = writeln!(out, "  held           {}", e.held);
    let failing = match e.failing {
        0 => good("0").to_string(),
        n => bad(n.to_string()).to_string(),
    };
    let _ = writeln!(out, "  failing        {failing}");
    for kind in Failure::ALL {
        if let Some(n) = e.kinds.get(&kind) {
            let _ = writeln!(out, "    {:<24} {n}", kind.name());
        }
    }
    out.push('\n');
    let wrong = e.disagreements();
    if wrong.is_empty() {
        let _ = writeln!(out, "{}", verdict(e));
    } else if cfg!(debug_assertions) {
        panic!(
            "an exploration's verdict disagrees with its counts: {}",
            wrong.join("; ")
        );
    } else {
        let _ = writeln!(
            out,
            "{}",
            warn(format!(
                "(idem left out its verdict: its counts disagree: {})",
                wrong.join("; ")
            ))
        );
    }
    out
}

/// The moves besides steps the walk branched on, in words.
fn branches(b: crate::explore::Branches, store: crate::store::StoreKind) -> Option<String> {
    let clock = match store {
        crate::store::StoreKind::Redis => "the clock (clock: pending claims' time to live run out)",
        _ => {
            "the clock (clock: pending claims made older than the stale-claim age, as if \
              that much time passed)"
        }
    };
    let crash = "a crash before any step (crashN: the worker's server process killed; its \
                 request retried once its claim is stale)";
    match (b.crashes, b.clock) {
        (true, true) => Some(format!("{crash} and {clock}")),
        (true, false) => Some(crash.to_string()),
        (false, true) => Some(clock.to_string()),
        (false, false) => None,
    }
}

/// The verdict of a walk on a cluster: what it saw, and what it did not
/// walk: every step was taken with every node caught up with the others,
/// so no step read a node that was behind.
fn on_a_cluster(e: &Exploration) -> String {
    let counted = format!(
        "failed in {} of {} interleavings",
        e.failing, e.interleavings
    );
    let caveat = "each step was taken once every node had applied the others' commits, so \
                  none read a node that was behind (lesson 11's --retry-behind shows one)";
    let besides = match (e.failing_on_steps_alone, besides_steps(e.branches)) {
        (0, Some(moves)) => {
            format!(", each with {moves} in it (on the requests' steps alone it held)")
        }
        _ => String::new(),
    };
    match e.failing {
        0 => warn(format!(
            "The guard held in all {} interleavings of this walk; {caveat}.",
            e.interleavings
        ))
        .to_string(),
        _ => bad(format!(
            "The guard {counted} of this walk{besides}; {caveat}."
        ))
        .to_string(),
    }
}

/// The moves besides steps a walk branched on, as a failing order's
/// cause: "a crash", "the clock", or both.
fn besides_steps(b: crate::explore::Branches) -> Option<&'static str> {
    match (b.crashes, b.clock) {
        (true, true) => Some("a crash or the clock"),
        (true, false) => Some("a crash"),
        (false, true) => Some("the clock"),
        (false, false) => None,
    }
}

/// One sentence on what the exploration shows, and no more than it shows.
/// On a cluster the walk waits for every node to apply the others' commits
/// after each step: its verdict covers those orders, and says so.
fn verdict(e: &Exploration) -> String {
    if e.nodes.is_some() {
        return on_a_cluster(e);
    }
    match (e.failing, e.total) {
        (0, Some(total)) => good(format!(
            "The guard held in all {total} {}: no order of these steps breaks it.",
            if e.reduced {
                "orders explored"
            } else {
                "interleavings"
            }
        ))
        .to_string(),
        (0, None) => warn(format!(
            "The guard held in the {} interleavings run, but the walk stopped at its bound: \
             that is not every order.",
            e.interleavings
        ))
        .to_string(),
        (n, _) if e.failing_on_steps_alone == 0 => bad(format!(
            "The guard failed in {n} of {} interleavings, each with {} in it: on the \
             requests' steps alone it held.",
            e.interleavings,
            besides_steps(e.branches).unwrap_or("a move besides the steps")
        ))
        .to_string(),
        (n, _) => bad(format!(
            "The guard failed in {n} of {} interleavings: the order of the steps alone \
             decides it, no timing needed.",
            e.interleavings
        ))
        .to_string(),
    }
}

/// The shortest failing interleaving: what it broke, how long it is, and
/// how to replay it.
pub fn render_shortest(e: &Exploration) -> String {
    let (Some(schedule), Some(replay)) = (&e.shortest, &e.replay) else {
        return String::new();
    };
    let broke: Vec<&str> = e.shortest_failures.iter().map(|f| f.name()).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{}",
        strong(format!(
            "The shortest failing interleaving: {} {}, {} between workers ({})",
            schedule.len(),
            match schedule.iter().all(|m| m.is_step()) {
                true => "steps",
                false => "moves",
            },
            match switches(schedule) {
                1 => "1 switch".to_string(),
                n => format!("{n} switches"),
            },
            broke.join(", ")
        ))
    );
    let _ = writeln!(
        out,
        "Replay it, one step at a time:\n{}",
        super::width::shell_lines(replay, super::width::width())
    );
    out
}

/// `compare --explore`: a row per strategy, held in K of N.
pub fn render_compare(rows: &[(String, Exploration)], row: &str) -> String {
    let Some((_, first)) = rows.first() else {
        return String::new();
    };
    let mut out = format!(
        "{}\n",
        strong(format!(
            "idem compare --explore · {} workers · every interleaving of their steps",
            first.workers
        ))
    );
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|(label, e)| {
            let held = match e.total {
                Some(total) => format!("{} of {total}", e.held),
                None => format!("{} of {} run (bound)", e.held, e.interleavings),
            };
            let kinds: Vec<String> = Failure::ALL
                .iter()
                .filter_map(|k| e.kinds.get(k).map(|n| format!("{} {n}", k.name())))
                .collect();
            let failed = match e.failing {
                0 => good("none").to_string(),
                _ => bad(kinds.join(", ")).to_string(),
            };
            let shortest = e
                .shortest
                .as_ref()
                .map_or("-".to_string(), |s| crate::explore::joined(s));
            vec![label.clone(), held, failed, shortest]
        })
        .collect();
    out.push_str(&super::table::render(
        &[row, "held in", "failed by", "shortest failing schedule"],
        lines,
        &[],
    ));
    out.push('\n');
    if rows.iter().any(|(_, e)| e.reduced) {
        let _ = writeln!(
            out,
            "{}",
            dim("reduced: steps that touch no row another request uses were taken at once")
        );
    }
    out
}
