//! `idem matrix` for people: a row per guard shape and transaction setting, grouped by shape, with a legend; compact at 80 columns, spelled out on a wide screen.

use std::collections::BTreeMap;
use std::fmt::Write;

use colored::ColoredString;

use super::style::{bad, dim, good, strong, warn};
use super::width::{visible, width};
use crate::matrix::{Matrix, MatrixRow};

/// The title, the settings every cell shares, and what was left out.
fn heading(m: &Matrix) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        strong(match m.engine {
            crate::race::engine::Engine::Postgres =>
                format!("idem matrix · {} runs per cell", m.runs),
            engine => format!(
                "idem matrix on {} (InnoDB) · {} runs per cell",
                engine.spec().server,
                m.runs
            ),
        })
    );
    let pool = super::race::pool(m.pool_size, m.runner_holds_connection);
    let _ = writeln!(
        out,
        "{}",
        dim(format!(
            "{} workers · {pool}{} · work {} ms · one key",
            m.workers,
            match m.via {
                crate::db::via::Via::Direct => "",
                crate::db::via::Via::Pgbouncer => " through PgBouncer (transaction mode)",
            },
            m.work_ms
        ))
    );
    if let Some(standby) = &m.standby {
        let reads = match standby.read_from {
            crate::race::ReadFrom::Standby => "finds read from a hot standby",
            crate::race::ReadFrom::Primary => "a hot standby beside every race",
        };
        let mut items = vec![reads.to_string()];
        if standby.apply_delay_ms > 0 {
            items.push(format!("applying {} ms late", standby.apply_delay_ms));
        }
        items.push(format!("synchronous {}", standby.synchronous.name()));
        let _ = writeln!(out, "{}", dim(items.join(" · ")));
    }
    if let Some(note) = m.left_out {
        let _ = writeln!(out, "{}", dim(note));
    }
    out
}

/// From this many columns on, the settings and answers are spelled out.
const WIDE: usize = 110;

/// The most answers the compact form lists per row.
const COMPACT_ANSWERS: usize = 2;

pub fn render(m: &Matrix) -> String {
    let wide = width() >= WIDE;
    let mut out = heading(m);
    out.push('\n');
    let rows: Vec<Vec<Cell>> = m.rows.iter().map(|row| cells(row, wide)).collect();
    let header = [
        if wide { "  transaction" } else { "  txn" },
        "XP",
        "rows",
        "calls",
        "work",
        "losers were told, per run",
        "stmts",
        "conn ms",
    ];
    let widths = column_widths(&header, &rows);
    let right = [false, true, true, true, true, false, true, true];
    let line = |cells: Vec<Cell>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = " ".repeat(widths[i].saturating_sub(cell.width));
            let gap = if i == 0 { "" } else { "  " };
            let _ = if right[i] {
                write!(text, "{gap}{pad}{}", cell.text)
            } else {
                write!(text, "{gap}{}{pad}", cell.text)
            };
        }
        text.trim_end().to_string()
    };
    let head = header.iter().map(|h| Cell::plain(h.to_string())).collect();
    let _ = writeln!(out, "{}", dim(line(head)));
    let mut shape = None;
    for (row, cells) in m.rows.iter().zip(rows) {
        if shape.as_ref() != Some(&row.cell.name()) {
            shape = Some(row.cell.name());
            let _ = writeln!(out, "{}", strong(row.cell.name()));
        }
        let _ = writeln!(out, "{}", line(cells));
    }
    out.push('\n');
    out.push_str(&legend(wide));
    out.push('\n');
    out.push_str(&verdict(m));
    out.push_str(&hermitage(m));
    out
}

/// On MariaDB: what each transaction row showed of Hermitage's G2, under
/// what Hermitage's MySQL column says of the levels.
fn hermitage(m: &Matrix) -> String {
    let rows: Vec<_> = m
        .rows
        .iter()
        .filter_map(|r| r.g2.as_ref().map(|g2| (r, g2)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nAs Hermitage names it: G2, an anti-dependency cycle, is two transactions \
         that each read that no row has the key, then each write one. Its MySQL \
         column: READ COMMITTED and REPEATABLE READ let G2 through, for plain reads; \
         SERIALIZABLE prevents it, by locks. A locking read (FOR UPDATE) locks the \
         key's gap at REPEATABLE READ too.\n",
    );
    // Rows of one shape that showed the same are told once.
    let mut groups: Vec<(String, Vec<String>, String)> = Vec::new();
    for (row, g2) in rows {
        let (name, told) = (row.cell.name(), g2.told(row.runs));
        match groups.last_mut() {
            Some((n, settings, t)) if *n == name && *t == told => settings.push(row.cell.short()),
            _ => groups.push((name, vec![row.cell.short()], told)),
        }
    }
    for (name, settings, told) in groups {
        let _ = write!(text, "  {name} {}\n    {told}\n", settings.join(", "));
    }
    super::width::fit(&text, width())
}

/// One cell's text and its width on screen (its colour takes none).
struct Cell {
    text: String,
    width: usize,
}

impl Cell {
    fn plain(text: String) -> Self {
        Self {
            width: visible(&text),
            text,
        }
    }

    fn coloured(text: ColoredString) -> Self {
        let shown = text.to_string();
        Self {
            width: visible(&shown),
            text: shown,
        }
    }
}

fn cells(row: &MatrixRow, wide: bool) -> Vec<Cell> {
    let setting = if wide {
        row.cell.long()
    } else {
        row.cell.short()
    };
    vec![
        Cell::plain(format!("  {setting}")),
        Cell::coloured(judge(range(&row.xp_rows), row.rows_held_rate)),
        Cell::coloured(judge(percent(row.rows_held_rate), row.rows_held_rate)),
        Cell::coloured(judge(range(&row.service_calls), row.work_held_rate)),
        Cell::coloured(judge(percent(row.work_held_rate), row.work_held_rate)),
        Cell::plain(told(
            &row.told,
            row.runs,
            if wide { usize::MAX } else { COMPACT_ANSWERS },
        )),
        Cell::plain(format!("{:.1}", row.statements_per_request)),
        Cell::plain(format!(
            "{:.0}",
            row.connection_seconds_per_request * 1000.0
        )),
    ]
}

fn column_widths(header: &[&str], rows: &[Vec<Cell>]) -> Vec<usize> {
    header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .map(|r| r[i].width)
                .chain([visible(h)])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Green when the guard held in every run, red when in none, yellow between.
fn judge(text: String, rate: f64) -> ColoredString {
    if rate >= 1.0 {
        good(text)
    } else if rate <= 0.0 {
        bad(text)
    } else {
        warn(text)
    }
}

/// `4`, or `3–4` when the runs differ.
fn range(histogram: &BTreeMap<u64, u64>) -> String {
    match (histogram.keys().next(), histogram.keys().next_back()) {
        (Some(low), Some(high)) if low != high => format!("{low}–{high}"),
        (Some(only), _) => only.to_string(),
        _ => "–".to_string(),
    }
}

fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

/// `500 23505 ×3, 201 replay ×1`: the most frequent answers first, per run.
fn told(told: &BTreeMap<String, u64>, runs: u64, most: usize) -> String {
    let mut answers: Vec<(&String, &u64)> = told.iter().collect();
    answers.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let per_run = |n: u64| {
        let each = n as f64 / runs.max(1) as f64;
        if (each - each.round()).abs() < 0.05 {
            format!("×{each:.0}")
        } else {
            format!("×{each:.1}")
        }
    };
    let mut text = answers
        .iter()
        .take(most)
        .map(|(answer, n)| format!("{answer} {}", per_run(**n)))
        .collect::<Vec<_>>()
        .join(", ");
    if answers.len() > most {
        text.push_str(", …");
    }
    if text.is_empty() {
        text.push('–');
    }
    text
}

fn legend(wide: bool) -> String {
    let mut lines = Vec::new();
    if !wide {
        lines.extend([
            "txn: the request's transaction: none, or one per request at RC read committed,",
            "  RR repeatable read, SER serializable; +3: retried up to 3 times on 40001",
        ]);
    }
    lines.extend([
        "XP: XP rows a run left (a range if runs differ); rows: runs that left one",
        "calls: award service calls a run made; work: runs that made one",
        "losers were told: what each request that did not create the row was answered",
        "stmts: statements per request; conn ms: pooled-connection time per request",
    ]);
    lines
        .iter()
        .map(|l| format!("{}\n", dim(l)))
        .collect::<String>()
}

/// What held, read off the rows: how many held for the rows, and which
/// held for the work, grouped by shape.
fn verdict(m: &Matrix) -> String {
    let held = |rate: f64| rate >= 1.0;
    let rows_held = m.rows.iter().filter(|r| held(r.rows_held_rate)).count();
    let mut work_held: Vec<(String, Vec<String>)> = Vec::new();
    for r in m.rows.iter().filter(|r| held(r.work_held_rate)) {
        let shape = r.cell.name();
        match work_held.last_mut() {
            Some((last, settings)) if *last == shape => settings.push(r.cell.short()),
            _ => work_held.push((shape, vec![r.cell.short()])),
        }
    }
    let work_held = work_held
        .iter()
        .map(|(shape, settings)| format!("{shape} ({})", settings.join(", ")))
        .collect::<Vec<_>>();
    let work = if work_held.is_empty() {
        "none".to_string()
    } else {
        work_held.join(", ")
    };
    format!(
        "One XP row in every run: {rows_held} of {} rows.\nOne service call in every run: {work}.\n",
        m.rows.len()
    )
}
