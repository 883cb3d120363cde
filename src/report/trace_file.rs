//! A race's trace as files: a page you can open (`--timeline FILE.html`) and Chrome Trace Event JSON (`--trace-json FILE`).
//!
//! Both come from the same steps as the terminal timeline. The page is one
//! self-contained SVG in HTML, with no script and nothing fetched: one lane
//! per worker, a bar per step labelled with what it did and (on hover) the
//! statement it sent, an arrow from a step that waited on a lock to the
//! worker that held it, and each lane's outcome. The JSON opens in Perfetto
//! (ui.perfetto.dev) and chrome://tracing.

use std::fmt::Write;

use serde_json::{Value, json};

use super::sql::{one_line, rails_line};
use crate::race::{Outcome, RaceResult, StepEvent};
use crate::strategy::Step;

/// The files `--timeline` and `--trace-json` ask for.
#[derive(Debug, Clone, Default)]
pub struct Files {
    pub(crate) html: Option<std::path::PathBuf>,
    pub(crate) trace_json: Option<std::path::PathBuf>,
}

impl Files {
    pub fn is_empty(&self) -> bool {
        self.html.is_none() && self.trace_json.is_none()
    }

    /// Refuses, before the race, a target idem would not write (a link, a
    /// FIFO, a directory, a device).
    pub fn check(&self) -> anyhow::Result<()> {
        for (flag, path) in self.asked() {
            crate::files::write::check_target(path, flag)?;
        }
        Ok(())
    }

    /// Writes each file asked for, whole or not at all, and says so to people.
    pub fn write(&self, r: &RaceResult, out: super::Output) -> anyhow::Result<()> {
        for (flag, path) in self.asked() {
            let contents = match flag {
                "--timeline" => html(r),
                _ => serde_json::to_string_pretty(&trace_events(r))?,
            };
            crate::files::write::replace(path, contents.as_bytes(), flag)?;
            out.text(|| {
                format!(
                    "{}\n",
                    super::style::dim(format!("{flag}: wrote {}", path.display()))
                )
            })?;
        }
        Ok(())
    }

    /// The files asked for, each with the flag that asked.
    fn asked(&self) -> impl Iterator<Item = (&'static str, &std::path::Path)> {
        let html = self.html.as_deref().map(|p| ("--timeline", p));
        let json = self.trace_json.as_deref().map(|p| ("--trace-json", p));
        html.into_iter().chain(json)
    }
}

/// Pixels: the page's drawing area.
const LEFT: f64 = 150.0;
const LANE_H: f64 = 56.0;
const BAR_H: f64 = 26.0;
const PLOT_W: f64 = 900.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 70.0;

/// Where the page draws: milliseconds to x, lanes to y.
struct Scale {
    /// The last step's end, in ms: the right edge of the plot.
    end: f64,
    height: f64,
}

impl Scale {
    fn of(r: &RaceResult) -> Self {
        let end = r
            .reports
            .iter()
            .flat_map(|w| w.steps.iter().map(|e| e.end_ms))
            .fold(0.0_f64, f64::max)
            .max(0.001);
        Self {
            end,
            height: TOP + r.reports.len() as f64 * LANE_H + 40.0,
        }
    }

    fn x(&self, ms: f64) -> f64 {
        LEFT + ms / self.end * PLOT_W
    }

    fn lane_y(&self, i: usize) -> f64 {
        TOP + i as f64 * LANE_H
    }
}

/// The page.
pub fn html(r: &RaceResult) -> String {
    let scale = Scale::of(r);
    let (height, width) = (scale.height, LEFT + PLOT_W + RIGHT);
    let title = format!(
        "idem race · {} · {} workers · pool {} · {} key row{}, {}",
        r.strategy,
        r.workers,
        r.pool_size,
        r.key_rows,
        if r.key_rows == 1 { "" } else { "s" },
        crate::race::xp_rows(r.xp_rows)
    );

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}">"#,
        esc(&title)
    );
    svg.push_str(
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>
"##,
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="28" class="title">{}</text>"#,
        esc(&title)
    );
    time_axis(&mut svg, &scale);
    lanes(&mut svg, r, &scale);
    lock_waits(&mut svg, r, &scale);
    svg.push_str("</svg>\n");
    page(&title, &svg)
}

/// The time axis, in ms from the start gate.
fn time_axis(svg: &mut String, scale: &Scale) {
    let (end, height) = (scale.end, scale.height);
    let x = |ms: f64| scale.x(ms);
    for tick in 0..=4 {
        let ms = end * f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#ddd"/><text x="{0:.1}" y="{3}" class="tick">{ms:.1} ms</text>"##,
            x(ms),
            TOP - 12.0,
            height - 30.0,
            TOP - 18.0
        );
    }
}

/// A lane per worker: its name, a bar per step, its answer.
fn lanes(svg: &mut String, r: &RaceResult, scale: &Scale) {
    let x = |ms: f64| scale.x(ms);
    for (i, w) in r.reports.iter().enumerate() {
        let y = scale.lane_y(i);
        let retry = if w.retry { " (retry)" } else { "" };
        let _ = writeln!(
            svg,
            r#"<g class="lane" data-worker="{}" data-outcome="{}">"#,
            w.worker,
            w.outcome.name()
        );
        let _ = writeln!(
            svg,
            r#"<text x="12" y="{:.1}" class="worker">worker {}{retry}</text>"#,
            y + BAR_H * 0.7,
            w.worker
        );
        for e in &w.steps {
            bar(svg, r, e, x(e.start_ms), x(e.end_ms), y);
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="outcome {}">{} {}</text>"#,
            LEFT + PLOT_W + 12.0,
            y + BAR_H * 0.7,
            outcome_class(w.outcome),
            if w.status == 0 {
                "—".to_string()
            } else {
                w.status.to_string()
            },
            w.outcome.name()
        );
        svg.push_str("</g>\n");
    }
}

/// Lock waits: from the step that waited to the lane of the worker that held the lock.
fn lock_waits(svg: &mut String, r: &RaceResult, scale: &Scale) {
    let (x, lane_y) = (|ms: f64| scale.x(ms), |i: usize| scale.lane_y(i));
    for (i, w) in r.reports.iter().enumerate() {
        let Some(waited) = w.steps.iter().find(|e| e.step == Step::Claim) else {
            continue;
        };
        for blocker in &w.blocked_by {
            let Some(j) = r.reports.iter().position(|o| o.worker == *blocker) else {
                continue;
            };
            let from = x((waited.start_ms + waited.end_ms) / 2.0);
            let (y1, y2) = (lane_y(i) + BAR_H / 2.0, lane_y(j) + BAR_H / 2.0);
            let (y1, y2) = if y2 > y1 {
                (y1 + BAR_H / 2.0, y2 - BAR_H / 2.0)
            } else {
                (y1 - BAR_H / 2.0, y2 + BAR_H / 2.0)
            };
            let _ = writeln!(
                svg,
                r##"<line class="wait" data-from="{}" data-to="{blocker}" x1="{from:.1}" y1="{y1:.1}" x2="{from:.1}" y2="{y2:.1}" stroke="#c0392b" stroke-width="2" marker-end="url(#arrow)"><title>worker {} waited for worker {blocker}'s lock</title></line>"##,
                w.worker, w.worker
            );
        }
    }
}

/// The HTML page around the drawing.
fn page(title: &str, svg: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }}
svg text {{ font: 13px system-ui, sans-serif; fill: #222; }}
svg text.title {{ font-size: 16px; font-weight: 600; }}
svg text.tick {{ font-size: 11px; fill: #777; text-anchor: middle; }}
svg text.label {{ font-size: 11px; fill: #fff; pointer-events: none; }}
svg text.good {{ fill: #1e7d32; }} svg text.warn {{ fill: #b26a00; }} svg text.bad {{ fill: #c0392b; }}
rect.bar {{ stroke: #fff; stroke-width: 1; }}
p.note {{ color: #555; max-width: 70em; }}
</style>
</head>
<body>
{svg}<p class="note">Each bar is one step of one worker, from the start gate; hover a bar for what it sent.
Red arrows: a step that waited on a lock, pointing at the worker that held it. Made by idem from the race's own trace.</p>
</body>
</html>
"#,
        esc(title)
    )
}

/// One step's bar, with its label and its tooltip.
fn bar(svg: &mut String, r: &RaceResult, e: &StepEvent, x1: f64, x2: f64, y: f64) {
    let w = (x2 - x1).max(2.0);
    let mut tip = format!("{} · {:.2}–{:.2} ms", e.step.name(), e.start_ms, e.end_ms);
    if !e.note.is_empty() {
        let _ = write!(tip, " · {}", e.note);
    }
    if let Some(sql) = e.sql {
        let _ = write!(tip, "\n{}", one_line(sql));
    }
    if let Some(rails) = rails_line(r, e) {
        let _ = write!(tip, "\n{rails}");
    }
    let label = match e.sql {
        Some(sql) => format!("{}: {}", e.step.name(), one_line(sql)),
        None if e.note.is_empty() => e.step.name().to_string(),
        None => format!("{}: {}", e.step.name(), e.note),
    };
    let _ = writeln!(
        svg,
        r#"<g class="step" data-step="{}"><rect class="bar" x="{x1:.1}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" rx="3" fill="{}"><title>{}</title></rect>"#,
        e.step.name(),
        colour(e.step),
        esc(&tip)
    );
    // A label where the bar is wide enough for a few characters of it.
    let room = ((w - 6.0) / 6.5).floor() as usize;
    if room >= 4 {
        let text: String = if label.chars().count() > room {
            label
                .chars()
                .take(room.saturating_sub(1))
                .chain(['…'])
                .collect()
        } else {
            label
        };
        let _ = writeln!(
            svg,
            r#"<text class="label" x="{:.1}" y="{:.1}">{}</text>"#,
            x1 + 4.0,
            y + BAR_H * 0.68,
            esc(&text)
        );
    }
    svg.push_str("</g>\n");
}

fn colour(step: Step) -> &'static str {
    match step {
        Step::Checkout => "#9e9e9e",
        Step::Find => "#1976d2",
        Step::Claim => "#6a1b9a",
        Step::Read => "#00838f",
        Step::Work => "#ef6c00",
        Step::Store => "#2e7d32",
        Step::Complete => "#2e7d32",
        Step::Wait => "#bdbdbd",
        Step::Fault => "#c0392b",
        Step::Begin | Step::Commit => "#546e7a",
        Step::Rollback => "#8d6e63",
        Step::Lock => "#5d4037",
    }
}

fn outcome_class(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Created | Outcome::Replayed => "good",
        Outcome::Conflict | Outcome::Mismatch => "warn",
        _ => "bad",
    }
}

/// Text made safe inside HTML and SVG.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The Chrome Trace Event format: a complete event (`X`) per step, one
/// thread per worker named with its outcome, and a flow arrow per lock wait.
pub fn trace_events(r: &RaceResult) -> Value {
    let us = |ms: f64| (ms * 1000.0).round() as i64;
    let mut events = vec![json!({
        "name": "process_name", "ph": "M", "pid": 1,
        "args": { "name": format!("idem race · {}", r.strategy) }
    })];
    for w in &r.reports {
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": w.worker,
            "args": { "name": format!("worker {} · {} {}", w.worker, w.status, w.outcome.name()) }
        }));
        for e in &w.steps {
            let mut args = json!({ "note": e.note });
            if let Some(sql) = e.sql {
                args["sql"] = json!(one_line(sql));
            }
            if let Some(rails) = rails_line(r, e) {
                args["rails"] = json!(rails);
            }
            events.push(json!({
                "name": e.step.name(), "cat": "step", "ph": "X", "pid": 1, "tid": w.worker,
                "ts": us(e.start_ms), "dur": us(e.end_ms - e.start_ms).max(1), "args": args
            }));
        }
    }
    let mut flow = 0;
    for w in &r.reports {
        let Some(waited) = w.steps.iter().find(|e| e.step == Step::Claim) else {
            continue;
        };
        for blocker in &w.blocked_by {
            flow += 1;
            events.push(json!({
                "name": "waited for lock", "cat": "lock", "ph": "s", "id": flow,
                "pid": 1, "tid": w.worker, "ts": us(waited.start_ms)
            }));
            events.push(json!({
                "name": "waited for lock", "cat": "lock", "ph": "f", "bp": "e", "id": flow,
                "pid": 1, "tid": blocker, "ts": us(waited.end_ms)
            }));
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}
