//! `idem step`: drive the interleaving by hand, or replay one with `--schedule`.

use std::fmt::Write as _;
use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::command::OnDatabase;
use super::keyboard::{Key, Keyboard};
use super::step_puzzle as puzzle;
use crate::cli::race::StepArgs;
use crate::db::{ConnectOptions, Database, book};
use crate::race::moves::Move;
use crate::race::stepper::{Controller, Standing};
use crate::race::{Race, RaceSettings};
use crate::report::style::{dim, strong, warn};
use crate::report::{self, Output, emit};

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    /// The race, with its `--schedule` if one was given.
    settings: RaceSettings,
    /// Show each step's statement in the closing timeline.
    sql: bool,
    files: report::trace_file::Files,
    pub(crate) out: Output,
    /// `--goal`: the XP rows the scheduler is asked to make.
    goal: Option<u64>,
}

pub fn plan(args: &StepArgs) -> Result<Plan> {
    let settings = args
        .race
        .input(args.strategy.strategy)
        .with(|r| r.shape.schedule = args.schedule.clone())
        .build_stepped()?;
    if args.schedule.is_none() && !std::io::stdin().is_terminal() {
        bail!(
            "idem step asks which worker moves next: run it in a terminal, or give --schedule 1,2,..."
        );
    }
    Ok(Plan {
        db: args.connect.options(),
        settings,
        sql: args.race.show.sql,
        files: {
            let files = super::race::trace_files(&args.race.show);
            files.check()?;
            files
        },
        out: Output::from_json_flag(args.race.show.json),
        goal: args.goal,
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let race = Race::prepare(db, self.settings.clone()).await?;
        let quiet = !self.out.for_people();
        if let Some(goal) = self.goal {
            self.out.text(|| puzzle::told(&self.settings, goal))?;
        }
        let schedule = self.settings.requests().schedule();
        let result = race
            .run_stepped(async |controller: &mut Controller| {
                controller.settle_all().await;
                match schedule {
                    Some(schedule) => scripted(controller, schedule, quiet).await,
                    None => interactive(controller, db).await,
                }
            })
            .await?;
        self.out
            .record(&result, |r| format!("\n{}", report::race::render(r)))?;
        // Time here is mostly a person thinking: the lanes show step order.
        let shown = report::timeline::Shown {
            axis: report::timeline::Axis::StepOrder,
            sql: self.sql,
        };
        self.out
            .text(|| report::timeline::render_with(&result, shown))?;
        self.files.write(&result, self.out)?;
        match self.goal {
            Some(goal) => puzzle::judged(db, self.settings, goal, &result, self.out).await,
            None => Ok(()),
        }
    }
}

/// Follows the schedule, printing each step unless `quiet`.
async fn scripted(controller: &mut Controller, schedule: &[Move], quiet: bool) -> Result<()> {
    controller
        .follow(schedule, |turn, line| match quiet {
            true => Ok(()),
            false => emit(&format!("{turn:>3}. {line}\n")),
        })
        .await?;
    if !quiet && !controller.all_finished() {
        emit(&format!(
            "{}\n",
            dim("end of the schedule: the rest run to the end")
        ))?;
    }
    Ok(())
}

/// Asks at the terminal which worker moves next: one key moves a worker
/// (Enter is not needed, and is ignored); `c` moves the clock past the
/// stale-claim age; `x` and a number crash that worker; `a` lets all run;
/// `q` or Ctrl-D stops, with a summary, and the rest run to the end so
/// nothing is left.
async fn interactive(controller: &mut Controller, db: &Database) -> Result<()> {
    let workers = controller.standing.len();
    let mut keys = Keyboard::open();
    let mut taken: Vec<String> = Vec::new();
    while !controller.all_finished() {
        let turn = taken.len() + 1;
        emit(&screen(controller, db, turn).await?)?;
        emit(&format!(
            "{} ",
            strong(format!(
                "press 1-{workers} to move that worker, c the clock, x and a number to crash \
                 one, a to let all run, q to stop{}:",
                keys.enter_hint()
            ))
        ))?;
        let key = keys.next().await?;
        emit("\n")?;
        match key {
            Key::Char('a') => return Ok(()),
            Key::Char('q') | Key::End => {
                let why = if key == Key::End { "end of input" } else { "q" };
                emit(&summary(&taken, why))?;
                return Ok(());
            }
            Key::Char('c') => take(controller, Move::Clock, &mut taken).await?,
            Key::Char('x') => {
                emit(&format!(
                    "{} ",
                    strong(format!("crash which worker (1-{workers})?"))
                ))?;
                let key = keys.next().await?;
                emit("\n")?;
                match worker_of(key, workers) {
                    Some(worker) => take(controller, Move::Crash(worker), &mut taken).await?,
                    None => emit(&format!("{}\n", warn("no worker crashed")))?,
                }
            }
            Key::Char(c) => match worker_of(key, workers) {
                Some(worker) => take(controller, Move::Step(worker), &mut taken).await?,
                None => emit(&format!(
                    "{}\n",
                    warn(format!(
                        "{c:?}: press a worker's number (1-{workers}), c, x, a or q"
                    ))
                ))?,
            },
        }
    }
    Ok(())
}

/// The worker a key names, if it names one of `workers`.
fn worker_of(key: Key, workers: usize) -> Option<usize> {
    match key {
        Key::Char(c) => c
            .to_digit(10)
            .map(|d| d as usize)
            .filter(|w| (1..=workers).contains(w)),
        Key::End => None,
    }
}

/// Makes one move by hand and says what it did, or why it could not.
async fn take(controller: &mut Controller, m: Move, taken: &mut Vec<String>) -> Result<()> {
    match controller.take(m).await {
        Ok(what) => {
            emit(&format!("{}\n", strong(&what)))?;
            taken.push(what);
        }
        Err(why) => emit(&format!("{}\n", warn(why)))?,
    }
    Ok(())
}

/// What happened before a stop: the steps taken, in order.
fn summary(taken: &[String], why: &str) -> String {
    let mut out = format!(
        "{}\n",
        strong(format!("stopped ({why}) after {} steps", taken.len()))
    );
    for (n, step) in taken.iter().enumerate() {
        let _ = writeln!(out, "{:>4}. {step}", n + 1);
    }
    let _ = writeln!(
        out,
        "{}",
        dim("the rest run to the end now, so that nothing is left behind; the race as it ended:")
    );
    out
}

/// The state of play: each worker's next step, and what the tables hold now.
async fn screen(controller: &Controller, db: &Database, turn: usize) -> Result<String> {
    let mut out = String::new();
    let _ = writeln!(out, "\n{}", strong(format!("— step {turn} —")));
    for (worker, standing) in &controller.standing {
        let state = match standing {
            Standing::Before(step) => format!("next: {}", step.name()),
            Standing::Running(step) => format!("running: {}", step.name()),
            Standing::Blocked(step, by) if by.is_empty() => {
                format!("{} <waiting for a free connection>", step.name())
            }
            Standing::Blocked(step, by) => {
                let by: Vec<String> = by.iter().map(|b| format!("worker {b}")).collect();
                format!("{} <waiting for {}>", step.name(), by.join(", "))
            }
            Standing::Finished => "finished".into(),
        };
        let _ = writeln!(out, "  worker {worker}  {state}");
    }
    let mut tx = db.book().await?;
    let keys: Vec<(String, String, Option<i32>)> =
        book::query_as(&db.sql("SELECT key, status, worker FROM idempotency_keys ORDER BY id"))
            .fetch_all(&mut *tx)
            .await?;
    let xp: Vec<(i64, i32, Option<i32>)> =
        book::query_as(&db.sql("SELECT id, amount, worker FROM experience_points ORDER BY id"))
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    let keys: Vec<String> = keys
        .iter()
        .map(|(k, s, w)| {
            format!(
                "{k} {s} (worker {})",
                w.map_or("?".into(), |w| w.to_string())
            )
        })
        .collect();
    let xp: Vec<String> = xp
        .iter()
        .map(|(id, a, w)| {
            format!(
                "#{id} {a} XP (worker {})",
                w.map_or("?".into(), |w| w.to_string())
            )
        })
        .collect();
    let none = || dim("(none)").to_string();
    let _ = writeln!(
        out,
        "  idempotency_keys   {}",
        if keys.is_empty() {
            none()
        } else {
            keys.join("; ")
        }
    );
    let _ = writeln!(
        out,
        "  experience_points  {}",
        if xp.is_empty() { none() } else { xp.join("; ") }
    );
    Ok(out)
}
