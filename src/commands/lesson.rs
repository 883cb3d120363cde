//! `idem lessons`, `idem lesson N`, `idem tour`: the course told, with its demonstrations run live.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs, Nothing};
use super::keyboard::Keyboard;
use super::predict;
use crate::db::{ConnectOptions, Database};
use crate::lesson::{LESSONS, Lesson, View};
use crate::matrix::Matrix;
use crate::progress::Progress;
use crate::race::RaceResult;
use crate::race::engine::Engines;
use crate::report::losers::LoserRow;
use crate::report::runs::{RunsSummary, render_summary};
use crate::report::style::{dim, good, strong};
use crate::report::{self, emit, table};
use crate::scenario::{self, Scenario, Verdict, builtin};

/// `idem lessons`: the list, one line a lesson.
pub struct List;

impl Command for List {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        list()
    }
}

fn list() -> Result<()> {
    // A progress file idem cannot read is said once, and counts as none.
    let progress = Progress::load().unwrap_or_else(|err| {
        eprintln!("note: {err:#}");
        Progress::default()
    });
    let rows = LESSONS
        .iter()
        .map(|l| {
            let read = match progress.lessons_read.contains(&l.number) {
                true => good("read").to_string(),
                false => String::new(),
            };
            let exercise = match crate::exercise::for_lesson(l.number) {
                Some(_) if progress.exercises_passed.contains(&l.number) => {
                    good("passed").to_string()
                }
                Some(_) => "to do".to_string(),
                None => String::new(),
            };
            vec![
                l.number.to_string(),
                l.title.to_string(),
                l.line.to_string(),
                read,
                exercise,
            ]
        })
        .collect();
    let next = match progress.next(LESSONS.len() as u8) {
        _ if progress.lessons_read.is_empty() => {
            "Start here: idem lesson 1 (or idem tour for all of them)".to_string()
        }
        Some(n) => format!(
            "{} of {} read. Go on: idem lesson {n} (or idem tour --from {n})",
            progress.lessons_read.len(),
            LESSONS.len()
        ),
        None => "Every lesson read.".to_string(),
    };
    emit(&format!(
        "{}\n{next}\n",
        table::render(
            &["#", "lesson", "in one line", "read", "exercise"],
            rows,
            &[0]
        )
    ))
}

/// `idem lesson N` and `idem tour`: lessons told with their scenarios,
/// loaded before any database starts.
pub struct Told {
    lessons: Vec<(&'static Lesson, Vec<Scenario>)>,
    /// No pauses between screens (`--no-pause`); none when paged either.
    no_pause: bool,
    /// Paged on a terminal (unless `--no-pager`).
    page: bool,
    /// Ask for predictions at a terminal (unless `--no-ask`).
    ask: bool,
    /// The engines whose demonstrations run (`--engine`).
    engines: Engines,
    db: ConnectOptions,
}

/// How a lesson is told: paused, paged, asked.
#[derive(Debug, Clone, Copy)]
pub struct Telling {
    pub no_pause: bool,
    pub page: bool,
    pub no_ask: bool,
}

/// A lesson's demonstrations on the engines asked for (`--engine`); the
/// screens are told whole.
fn on_engines(n: u8, engines: &Engines) -> Result<Vec<Scenario>> {
    let mut scenarios = builtin::for_lesson(n)?;
    scenarios.retain(|s| engines.takes(s.engine));
    Ok(scenarios)
}

pub fn plan(numbers: &[u8], how: Telling, engines: Engines, db: ConnectOptions) -> Result<Told> {
    let lessons: Vec<(&'static Lesson, Vec<Scenario>)> = numbers
        .iter()
        .map(|n| Ok((&LESSONS[usize::from(*n) - 1], on_engines(*n, &engines)?)))
        .collect::<Result<_>>()?;
    if lessons.iter().all(|(_, scenarios)| scenarios.is_empty()) {
        let which = match numbers {
            [one] => format!("lesson {one}"),
            _ => "these lessons".to_string(),
        };
        bail!(
            "{which} has no demonstration on {}; without --engine, `idem lesson` runs each on its own engine",
            engines.said()
        );
    }
    Ok(Told {
        lessons,
        no_pause: how.no_pause,
        page: how.page,
        ask: !how.no_ask,
        engines,
        db,
    })
}

impl Command for Told {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        // A learner asked for predictions answers at the terminal, which a
        // pager would hold: the pauses between screens stand in for it.
        let asks = self.ask
            && std::io::stdin().is_terminal()
            && self.lessons.iter().any(|(l, _)| !l.predictions.is_empty());
        Needs::on(self.db.clone()).paged(self.page && !asks)
    }

    async fn run(self, db: &Database, given: Given) -> Result<()> {
        // Never asked off a terminal, nor in a pager (the pager has the terminal).
        let ask = self.ask && !given.paged && std::io::stdin().is_terminal();
        let how = (self.no_pause || given.paged, ask);
        tell(&self.lessons, how, &self.engines, db).await
    }
}

/// A scenario's file name without its folder and `.toml`.
pub fn name_of(s: &Scenario) -> &str {
    let file = s.source.rsplit('/').next().unwrap_or(&s.source);
    file.strip_suffix(".toml").unwrap_or(file)
}

async fn tell(
    lessons: &[(&'static Lesson, Vec<Scenario>)],
    (no_pause, ask): (bool, bool),
    engines: &Engines,
    db: &Database,
) -> Result<()> {
    let pause = !no_pause && std::io::stdin().is_terminal();
    for (n, (lesson, scenarios)) in lessons.iter().enumerate() {
        emit(&format!(
            "\n{}\n\n",
            strong(format!("Lesson {}: {}", lesson.number, lesson.title))
        ))?;
        // Ask before showing: the screens tell the answer.
        let guesses = match ask {
            true => ask_predictions(lesson, scenarios).await?,
            false => BTreeMap::new(),
        };
        screens(lesson, pause).await?;
        if scenarios.is_empty() {
            let none = format!(
                "This lesson has no demonstration on {} (`idem lesson {}` runs its own).",
                engines.said(),
                lesson.number
            );
            emit(&format!("{}\n\n", dim(none)))?;
        } else {
            let running = format!(
                "Running the lesson's demonstrations. {}",
                look_at(&lesson.look_at)
            );
            pace(&format!("{}\n\n", dim(running)), pause).await?;
            show_all(lesson, scenarios, (db, engines), (pause, &guesses)).await?;
        }
        emit(&format!(
            "{}\n{}\n",
            strong("Explore on your own:"),
            report::width::shell_lines(&lesson.experiment, report::width::width())
        ))?;
        Progress::read(lesson.number);
        if n + 1 < lessons.len() {
            wait(pause).await?;
        }
    }
    let end = match lessons {
        [(only, _)] => format!("End of lesson {}.", only.number),
        _ => "End of the tour.".to_string(),
    };
    // Learn by doing: the last lesson's exercise, if it has one.
    let exercise = lessons
        .last()
        .and_then(|(last, _)| crate::exercise::for_lesson(last.number))
        .map(|e| {
            format!(
                "\nTry it yourself: lesson {}'s exercise, checked by idem\n  idem exercise {}",
                e.lesson, e.lesson
            )
        })
        .unwrap_or_default();
    // Where to go on from the last lesson told, if there is more.
    let next = lessons
        .last()
        .and_then(|(last, _)| LESSONS.get(usize::from(last.number)))
        .map(|next| {
            format!(
                "\nNext: lesson {}, {}\n  idem lesson {}",
                next.number, next.title, next.number
            )
        })
        .unwrap_or_default();
    emit(&format!("\n{}{exercise}{next}\n", strong(end)))
}

/// The learner's predictions of the figures this run will show.
async fn ask_predictions(lesson: &Lesson, scenarios: &[Scenario]) -> Result<BTreeMap<String, u64>> {
    let mut guesses = BTreeMap::new();
    let mut keys = Keyboard::open();
    let shown = |p: &&crate::lesson::Prediction| scenarios.iter().any(|s| name_of(s) == p.scenario);
    for p in lesson.predictions.iter().filter(shown) {
        if let Some(guess) = predict::ask(p, &mut keys).await? {
            guesses.insert(p.scenario.clone(), guess);
        }
    }
    Ok(guesses)
}

/// The lesson's screens, with a pause once the terminal is full, not once
/// a paragraph, and one after the last.
async fn screens(lesson: &Lesson, pause: bool) -> Result<()> {
    let mut shown = 0;
    for screen in &lesson.screens {
        let lines = report::width::fit(screen, report::width::width())
            .lines()
            .count()
            + 1;
        if shown > 0 && shown + lines > report::width::height().saturating_sub(4) {
            wait(pause).await?;
            shown = 0;
        }
        emit(&format!("{screen}\n\n"))?;
        shown += lines;
    }
    wait(pause).await
}

/// "Look at: x" as a sentence.
fn look_at(text: &str) -> String {
    let mut text = format!("Look at {text}");
    if !text.ends_with('.') {
        text.push('.');
    }
    text
}

/// What one scenario showed, kept for a second look.
struct Ran {
    verdict: Verdict,
    audit: Option<crate::store::audit::Audit>,
}

/// Runs the lesson's demonstrations in the order its `Shows:` gives, each
/// scenario once, and shows each as its view asks.
async fn show_all(
    lesson: &Lesson,
    scenarios: &[Scenario],
    (db, engines): (&Database, &Engines),
    (pause, guesses): (bool, &BTreeMap<String, u64>),
) -> Result<()> {
    let mut ran: BTreeMap<String, Ran> = BTreeMap::new();
    let mut beside: Option<RaceResult> = None;
    let mut losers: Vec<LoserRow> = Vec::new();
    let mut matrix: Vec<Vec<RaceResult>> = Vec::new();
    let shows = shown_on(lesson, scenarios)?;
    for (i, show) in shows.iter().enumerate() {
        let scenario = scenarios
            .iter()
            .find(|s| name_of(s) == show.scenario)
            .expect("shown_on keeps the shows of these scenarios");
        // A row of the matrix is one line, with a pause before the first only.
        let row = show.view == View::Matrix;
        let first_row = row && (i == 0 || shows[i - 1].view != View::Matrix);
        if !ran.contains_key(&show.scenario) {
            // Between demonstrations as between screens: one at a time.
            if !ran.is_empty() && (!row || first_row) {
                wait(pause).await?;
            }
            if !row {
                pace(&format!("{}\n", scenario.explain.trim()), pause).await?;
            }
            let verdict = scenario::run(db, scenario)
                .await
                .map_err(|e| unless_left_out(e, scenario, engines))?;
            // The audit reads what the race left, before anything else runs.
            let audit = match lesson
                .shows
                .iter()
                .any(|s| s.scenario == show.scenario && s.view == View::Audit)
            {
                true => {
                    let key = verdict
                        .results
                        .last()
                        .map(|r| r.key.clone())
                        .unwrap_or_default();
                    Some(crate::store::audit::audit(db, &key).await?)
                }
                false => None,
            };
            let shown = match row {
                true => report::scenario::render_verdict_line(&verdict),
                false => format!("{}\n", report::scenario::render_verdict(&verdict)),
            };
            pace(&shown, pause).await?;
            ran.insert(show.scenario.clone(), Ran { verdict, audit });
        }
        let Ran { verdict, audit } = &ran[&show.scenario];
        // The verdict on a prediction comes under the figures it is about,
        // once (a scenario may be shown twice), and waits to be read.
        let last_view = !shows[i + 1..].iter().any(|s| s.scenario == show.scenario);
        if row {
            matrix.push(verdict.results.clone());
            if !shows[i + 1..].iter().any(|s| s.view == View::Matrix)
                && let Some(matrix) = Matrix::of(&matrix)
            {
                pace(&format!("\n{}\n", report::matrix::render(&matrix)), pause).await?;
            }
            if last_view && answer(lesson, &show.scenario, guesses, verdict, pause).await? {
                wait(pause).await?;
            }
            continue;
        }
        let more_losers = shows[i + 1..].iter().any(|s| s.view == View::Losers);
        let text = show_view(
            show.view,
            verdict,
            audit.as_ref(),
            more_losers,
            &mut beside,
            &mut losers,
        );
        pace(&text, pause).await?;
        if last_view && answer(lesson, &show.scenario, guesses, verdict, pause).await? {
            wait(pause).await?;
        }
    }
    Ok(())
}

/// The lesson's `Shows:` of `scenarios` (those on the engines asked for),
/// in order; a show of no built-in scenario at all is a lesson's mistake.
fn shown_on<'a>(
    lesson: &'a Lesson,
    scenarios: &[Scenario],
) -> Result<Vec<&'a crate::lesson::Show>> {
    let every = builtin::for_lesson(lesson.number)?;
    let mut shows = Vec::new();
    for show in &lesson.shows {
        if scenarios.iter().any(|s| name_of(s) == show.scenario) {
            shows.push(show);
        } else if !every.iter().any(|s| name_of(s) == show.scenario) {
            bail!(
                "lesson {} shows {:?}, which is not one of its scenarios",
                lesson.number,
                show.scenario
            );
        }
    }
    Ok(shows)
}

/// A demonstration on MariaDB that could not start its server says how to
/// leave MariaDB's demonstrations out, unless the learner asked for them.
pub fn unless_left_out(
    err: anyhow::Error,
    scenario: &Scenario,
    engines: &Engines,
) -> anyhow::Error {
    use crate::race::engine::Engine;
    if scenario.engine == Engine::Postgres || engines.chosen() {
        return err;
    }
    anyhow::anyhow!(
        "{err:#} (or leave the demonstrations on {} out: --engine postgres)",
        scenario.engine.spec().server
    )
}

/// One demonstration shown as the lesson's view asks; side-by-side and
/// loser views gather races until their last one.
fn show_view(
    view: View,
    verdict: &Verdict,
    audit: Option<&crate::store::audit::Audit>,
    more_losers: bool,
    beside: &mut Option<RaceResult>,
    losers: &mut Vec<LoserRow>,
) -> String {
    let mut out = String::new();
    let first = verdict.results.first();
    if let Some(r) = verdict.engine_results.first() {
        return match view {
            View::Race => format!("{}\n", report::engine::render(r)),
            View::Runs => format!("{}\n", report::engine::render_runs(&verdict.engine_results)),
            _ => out,
        };
    }
    if let (View::Explore, Some(found)) = (view, &verdict.explored) {
        return format!("{}\n", report::explore::render(found));
    }
    match (view, first) {
        (View::Verdict | View::Explore, _) | (_, None) => {}
        (View::Race, Some(r)) => out.push_str(&format!("{}\n", report::race::render(r))),
        (View::Trace, Some(r)) => out.push_str(&format!(
            "{}\n{}\n",
            report::race::render(r),
            report::timeline::render_with(r, Default::default())
        )),
        (View::Runs, Some(r)) => {
            let mut summary = RunsSummary::default();
            verdict.results.iter().for_each(|r| summary.add(r));
            let line = report::race::settings_line(r);
            out.push_str(&format!(
                "{}\n",
                render_summary(&summary, &line, r.strategy.name())
            ));
        }
        (View::Schedule, Some(r)) => out.push_str(&format!("{}\n", schedule(r))),
        (View::Side, Some(r)) => match beside.take() {
            None => *beside = Some(r.clone()),
            Some(left) => out.push_str(&format!("{}\n", side_by_side(&left, r))),
        },
        (View::Losers, Some(r)) => {
            let policy = r.loser_policy.map_or("none", |l| l.name());
            losers.push(LoserRow::from_races(policy, &verdict.results));
            if !more_losers {
                let line = report::race::settings_line_for_every_loser(r);
                out.push_str(&format!("{}\n", report::losers::render(losers, &line)));
            }
        }
        // Gathered by `show_all`, shown as one table.
        (View::Matrix, Some(_)) => {}
        (View::Audit, Some(_)) => {
            if let Some(audit) = audit {
                out.push_str(&format!("{}\n", report::stores::render_audit(audit)));
            }
        }
    }
    out
}

/// A scheduled race: its steps in the order they were taken.
fn schedule(r: &RaceResult) -> String {
    let shown = report::timeline::Shown {
        axis: report::timeline::Axis::StepOrder,
        sql: false,
    };
    report::timeline::render_with(r, shown)
}

/// Two scheduled races, their steps side by side in the order they ended.
fn side_by_side(left: &RaceResult, right: &RaceResult) -> String {
    let steps = |r: &RaceResult| -> Vec<String> {
        let mut all: Vec<(usize, &crate::race::StepEvent)> = r
            .reports
            .iter()
            .flat_map(|w| w.steps.iter().map(move |e| (w.worker, e)))
            .filter(|(_, e)| e.step != crate::strategy::Step::Checkout)
            .collect();
        all.sort_by(|a, b| a.1.end_ms.total_cmp(&b.1.end_ms));
        all.iter()
            .map(|(w, e)| format!("worker {w} {}: {}", e.step.name(), e.note))
            .collect()
    };
    let (a, b) = (steps(left), steps(right));
    let rows = (0..a.len().max(b.len()))
        .map(|i| {
            vec![
                (i + 1).to_string(),
                a.get(i).cloned().unwrap_or_default(),
                b.get(i).cloned().unwrap_or_default(),
            ]
        })
        .chain([vec![
            String::new(),
            crate::race::xp_rows(left.xp_rows),
            crate::race::xp_rows(right.xp_rows),
        ]])
        .collect();
    table::render(
        &["step", left.strategy.name(), right.strategy.name()],
        rows,
        &[0],
    )
}

/// The learner's prediction for `scenario`, if they made one, beside the
/// figure it showed; kept in the progress file.
async fn answer(
    lesson: &Lesson,
    scenario: &str,
    guesses: &BTreeMap<String, u64>,
    verdict: &Verdict,
    pause: bool,
) -> Result<bool> {
    let Some(p) = lesson.predictions.iter().find(|p| p.scenario == scenario) else {
        return Ok(false);
    };
    let Some(&guess) = guesses.get(scenario) else {
        return Ok(false);
    };
    let seen = predict::figures(p.figure, verdict);
    let Some(text) = predict::told(p, guess, &seen) else {
        return Ok(false);
    };
    pace(&format!("{text}\n"), pause).await?;
    Progress::predicted(lesson.number, scenario, guess, &seen);
    Ok(true)
}

/// Waits for a key (Enter, or any other) on a terminal; Ctrl-C stops at
/// once, as anywhere else.
async fn wait(pause: bool) -> Result<()> {
    if pause {
        emit(&dim("(Enter to go on) ").to_string())?;
        Keyboard::open().any().await?;
        // The key was not echoed: the next text starts on a line of its own.
        emit("\n")?;
        SHOWN.store(0, Ordering::Relaxed);
    }
    Ok(())
}

/// Rows shown since the learner last pressed a key.
static SHOWN: AtomicUsize = AtomicUsize::new(0);

/// Shows a demonstration's `text`, pausing (when pausing at all) before a
/// row that would push a row not yet read off the terminal's screen: a
/// race card, its table and the verdict on a prediction are read before
/// the next one scrolls them away.
async fn pace(text: &str, pause: bool) -> Result<()> {
    let (width, room) = (
        report::width::width().max(1),
        report::width::height().saturating_sub(2).max(10),
    );
    // A line wider than the terminal takes as many rows as it wraps to.
    let rows_of = |line: &str| {
        report::width::visible(line.trim_end_matches('\n'))
            .div_ceil(width)
            .max(1)
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        // A block (a card, a table: the lines up to the next blank one)
        // that fits on a screen starts on a fresh one rather than break.
        let starts_block = i == 0 || lines[i - 1].trim().is_empty();
        let block: usize = lines[i..]
            .iter()
            .take_while(|l| !l.trim().is_empty())
            .map(|l| rows_of(l))
            .sum();
        let shown = SHOWN.load(Ordering::Relaxed);
        let rows = rows_of(line);
        let overflows = shown + rows > room;
        let moves_whole = starts_block && shown > 0 && block <= room && shown + block > room;
        if pause && (overflows || moves_whole) {
            wait(pause).await?;
        }
        emit(line)?;
        SHOWN.fetch_add(rows, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lesson::LESSONS;

    /// Every lesson's command to try, as printed on an 80-column screen:
    /// no line wider, every break after a ` \`, and pasted whole it is the
    /// command itself.
    #[test]
    fn every_command_to_try_pastes_whole_at_80_columns() {
        for lesson in LESSONS.iter() {
            let printed = report::width::shell_lines(&lesson.experiment, 80);
            let lines: Vec<&str> = printed.lines().collect();
            assert!(lines.iter().all(|l| l.chars().count() <= 80), "{printed}");
            for line in &lines[..lines.len() - 1] {
                assert!(line.ends_with(" \\"), "{printed}");
            }
            let pasted = printed
                .split(" \\\n")
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(pasted, lesson.experiment);
        }
    }
}
