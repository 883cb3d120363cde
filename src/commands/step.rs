//! `idem step`: drive the interleaving by hand, or replay one with `--schedule`.

use std::fmt::Write as _;
use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs, OnDatabase};
use super::keyboard::{Key, Keyboard};
use super::step_puzzle as puzzle;
use crate::cli::race::StepArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::db::{ConnectOptions, Database, book};
use crate::race::engine::Engine;
use crate::race::mariadb::{self, KeyRow, MariadbRace, XpRow};
use crate::race::moves::Move;
use crate::race::options::RaceInput;
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

/// The same, on MariaDB.
pub struct OnMariadb {
    options: MariadbOptions,
    race: MariadbRace,
    sql: bool,
    out: Output,
    /// `--goal`: the XP rows the scheduler is asked to make.
    goal: Option<u64>,
}

/// A step-by-step race on the engine `--engine` names.
pub enum Planned {
    Postgres(Box<Plan>),
    Mariadb(Box<OnMariadb>),
}

pub fn plan(args: &StepArgs) -> Result<Planned> {
    let planned = on_engine(args)?;
    if args.schedule.is_none() && !std::io::stdin().is_terminal() {
        bail!(
            "idem step asks which worker moves next: run it in a terminal, or give --schedule 1,2,..."
        );
    }
    Ok(planned)
}

/// The stepped race on the engine `--engine` names, its input checked.
fn on_engine(args: &StepArgs) -> Result<Planned> {
    let input = args
        .race
        .input(args.strategy.strategy)
        .with(|r| r.shape.schedule = args.schedule.clone());
    if args.engine == Engine::Mariadb {
        return Ok(Planned::Mariadb(Box::new(on_mariadb(args, &input)?)));
    }
    let settings = input.build_stepped()?;
    Ok(Planned::Postgres(Box::new(Plan {
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
    })))
}

/// The stepped race on MariaDB, refusing in one line what it does not
/// take there yet.
fn on_mariadb(args: &StepArgs, input: &RaceInput) -> Result<OnMariadb> {
    let show = &args.race.show;
    if show.timeline.is_some() || show.trace_json.is_some() {
        bail!("idem step --engine mariadb does not take --timeline and --trace-json yet");
    }
    let race = MariadbRace::stepped_from_input(input)?;
    Ok(OnMariadb {
        options: args.connect.mariadb_for(race.cluster.nodes)?,
        race,
        sql: show.sql,
        out: Output::from_json_flag(show.json),
        goal: args.goal,
    })
}

impl Command for OnMariadb {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone())
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        let quiet = !self.out.for_people();
        if let Some(goal) = self.goal {
            self.out.text(|| puzzle::told(self.race.settings(), goal))?;
        }
        let schedule = self.race.settings().requests().schedule();
        let result = mariadb::run_stepped(db, &self.race, async |controller: &mut Controller| {
            controller.settle_all().await;
            match schedule {
                Some(schedule) => scripted(controller, schedule, quiet).await,
                None => interactive(controller, Tables::Mariadb(db)).await,
            }
        })
        .await?;
        self.out
            .record(&result, |r| format!("\n{}", report::engine::render(r)))?;
        self.out
            .text(|| report::engine::render_steps(&result, self.sql))?;
        match self.goal {
            Some(goal) => puzzle::judged_on_mariadb(db, &self.race, goal, &result, self.out).await,
            None => Ok(()),
        }
    }
}

/// Where the screen reads the tables from, between steps.
#[derive(Clone, Copy)]
enum Tables<'a> {
    Postgres(&'a Database),
    Mariadb(&'a Mariadb),
}

impl Tables<'_> {
    /// The key rows and the XP rows, as they are now.
    async fn rows(self) -> Result<(Vec<KeyRow>, Vec<XpRow>)> {
        let db = match self {
            Tables::Mariadb(db) => return mariadb::rows_now(db).await,
            Tables::Postgres(db) => db,
        };
        let mut tx = db.book().await?;
        let keys =
            book::query_as(&db.sql("SELECT key, status, worker FROM idempotency_keys ORDER BY id"))
                .fetch_all(&mut *tx)
                .await?;
        let xp =
            book::query_as(&db.sql("SELECT id, amount, worker FROM experience_points ORDER BY id"))
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        Ok((keys, xp))
    }
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
                    None => interactive(controller, Tables::Postgres(db)).await,
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
async fn interactive(controller: &mut Controller, tables: Tables<'_>) -> Result<()> {
    let workers = controller.standing.len();
    let mut keys = Keyboard::open();
    let mut taken: Vec<String> = Vec::new();
    while !controller.all_finished() {
        let turn = taken.len() + 1;
        emit(&screen(controller, tables, turn).await?)?;
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
async fn screen(controller: &Controller, tables: Tables<'_>, turn: usize) -> Result<String> {
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
    let (keys, xp) = tables.rows().await?;
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
