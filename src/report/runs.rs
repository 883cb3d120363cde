//! Many races at once: the distribution of XP rows over `--runs`, and strategies side by side.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::style::{bad, dim, good, strong};
use super::table;
use crate::race::xp_rows;
use crate::race::{Outcome, RaceResult};
pub use crate::race::{histogram, outcome_totals};

/// What R races of one strategy came to.
#[derive(Debug, Clone, Default)]
pub struct RunsSummary {
    pub(crate) runs: u64,
    /// XP rows → how many runs left that many.
    xp_histogram: BTreeMap<u64, u64>,
    key_histogram: BTreeMap<u64, u64>,
    /// Service calls → how many runs made that many.
    calls_histogram: BTreeMap<u64, u64>,
    /// Runs whose XP rows were the course's figure for these settings.
    lesson_figure: u64,
    runs_with_figure: u64,
    runs_with_duplicates: u64,
    /// With `--failover`: the runs that failed over, and those whose
    /// acknowledged key was lost in it.
    failovers: u64,
    keys_lost: u64,
    outcomes: BTreeMap<Outcome, u64>,
    elapsed_ms: f64,
}

impl RunsSummary {
    pub fn add(&mut self, r: &RaceResult) {
        self.runs += 1;
        *self.xp_histogram.entry(r.xp_rows).or_default() += 1;
        *self.key_histogram.entry(r.key_rows).or_default() += 1;
        *self.calls_histogram.entry(r.service_calls).or_default() += 1;
        self.lesson_figure = r.lesson_figure;
        self.runs_with_figure += u64::from(r.xp_rows == r.lesson_figure);
        self.runs_with_duplicates += u64::from(r.duplicates > 0);
        if let Some(f) = &r.failover {
            self.failovers += 1;
            self.keys_lost += u64::from(f.acknowledged_key_lost);
        }
        for (outcome, count) in &r.outcomes {
            *self.outcomes.entry(*outcome).or_default() += count;
        }
        self.elapsed_ms += r.elapsed_ms;
    }

    /// The share of runs that showed the lesson's figure, from 0 to 1.
    pub fn figure_rate(&self) -> f64 {
        self.runs_with_figure as f64 / self.runs.max(1) as f64
    }
}

/// The report after `idem race --runs R`.
pub fn render_summary(s: &RunsSummary, settings_line: &str, strategy: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} {}",
        strong("idem race ·"),
        strong(strategy),
        strong(format!("· {} runs", s.runs))
    );
    let _ = writeln!(out, "{}\n", dim(settings_line));
    let _ = writeln!(
        out,
        "  XP rows per run       {}",
        strong(histogram(&s.xp_histogram))
    );
    let _ = writeln!(
        out,
        "  key rows per run      {}",
        histogram(&s.key_histogram)
    );
    let _ = writeln!(
        out,
        "  service calls         {}",
        histogram(&s.calls_histogram)
    );
    let share = format!(
        "{} of {} runs ({:.1}%)",
        s.runs_with_figure,
        s.runs,
        s.figure_rate() * 100.0
    );
    let _ = writeln!(
        out,
        "  the course's figure   {} in {}",
        xp_rows(s.lesson_figure),
        strong(share)
    );
    let dup = format!("{} of {} runs", s.runs_with_duplicates, s.runs);
    let dup = if s.runs_with_duplicates == 0 {
        good(dup)
    } else {
        bad(dup)
    };
    let _ = writeln!(out, "  runs with duplicates  {dup}");
    if s.failovers > 0 {
        let lost = format!(
            "{} of {} failovers lost the acknowledged key",
            s.keys_lost, s.failovers
        );
        let lost = match s.keys_lost {
            0 => good(lost),
            _ => bad(lost),
        };
        let _ = writeln!(out, "  failover              {lost}");
    }
    let _ = writeln!(
        out,
        "  outcomes              {}",
        outcome_totals(&s.outcomes)
    );
    let _ = writeln!(
        out,
        "  time                  {:.1} ms per race on average",
        s.elapsed_ms / s.runs.max(1) as f64
    );
    out
}

/// `idem compare`: one row per strategy, or per store (`row`, the first
/// column's title, names which).
pub fn render_compare(rows: &[(String, RunsSummary)], settings_line: &str, row: &str) -> String {
    let mut out = String::new();
    let runs = rows.first().map_or(1, |(_, s)| s.runs);
    let title = if runs == 1 {
        String::new()
    } else {
        format!(" · {runs} runs each")
    };
    let _ = writeln!(out, "{}{}", strong("idem compare"), strong(title));
    let _ = writeln!(out, "{}\n", dim(settings_line));
    let body = rows
        .iter()
        .map(|(name, s)| {
            let dup_runs = if s.runs_with_duplicates == 0 {
                good("0").to_string()
            } else {
                bad(format!(
                    "{:.0}%",
                    100.0 * s.runs_with_duplicates as f64 / s.runs as f64
                ))
                .to_string()
            };
            let count = |o: Outcome| s.outcomes.get(&o).copied().unwrap_or(0).to_string();
            vec![
                name.clone(),
                histogram(&s.key_histogram),
                histogram(&s.xp_histogram),
                histogram(&s.calls_histogram),
                dup_runs,
                count(Outcome::Created),
                count(Outcome::Replayed),
                count(Outcome::Conflict),
                count(Outcome::Duplicate),
                count(Outcome::CheckoutTimeout),
                format!("{:.1} ms", s.elapsed_ms / s.runs.max(1) as f64),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            row,
            "key rows",
            "XP rows",
            // Calls to the award service: what no rollback undoes.
            "calls",
            "runs w/ dup",
            // Short, so that at 80 columns the strategies stay side by side.
            "created",
            "replay",
            "409",
            "dup",
            "timeout",
            "time/race",
        ],
        body,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    ));
    out.push('\n');
    out.push_str(&format!(
        "{}\n",
        dim("calls: the times the work called the award service, which no rollback undoes")
    ));
    out
}
