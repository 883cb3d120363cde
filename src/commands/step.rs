//! `idem step`: drive the interleaving by hand, or replay one with `--schedule`.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal};

use anyhow::{Result, bail};

use crate::cli::StepArgs;
use crate::db::Database;
use crate::race::stepper::{Controller, Standing};
use crate::race::{Race, RaceSettings};
use crate::report::style::{dim, strong, warn};
use crate::report::{self, Output, emit};

pub struct Plan {
    pub settings: RaceSettings,
    pub schedule: Option<Vec<usize>>,
    pub out: Output,
}

pub fn plan(args: &StepArgs) -> Result<Plan> {
    let mut settings = args.race.settings(args.strategy)?;
    // Every worker gets a connection unless --pool-size says otherwise.
    if args.race.app.pool_size == 5 && settings.workers + 1 > 5 {
        settings.pool_size = settings.workers + 1;
    }
    settings.validate()?;
    if !(2..=5).contains(&settings.workers) {
        bail!("idem step drives 2 to 5 workers; got {}", settings.workers);
    }
    if settings.crash.is_some() || settings.kill_connection || settings.cache_pressure > 0 {
        bail!("idem step drives one plain race; faults and cache pressure are for `idem race`");
    }
    if args.race.shape.http {
        bail!("idem step pauses workers inside idem, between statements; --http is for `idem race`");
    }
    if let Some(schedule) = &args.schedule
        && let Some(bad) = schedule
            .iter()
            .find(|w| !(1..=settings.workers as u64).contains(*w))
    {
        bail!(
            "--schedule names worker {bad}, but there are {} workers",
            settings.workers
        );
    }
    if args.schedule.is_none() && !std::io::stdin().is_terminal() {
        bail!(
            "idem step asks which worker moves next: run it in a terminal, or give --schedule 1,2,..."
        );
    }
    Ok(Plan {
        settings,
        schedule: args
            .schedule
            .as_ref()
            .map(|s| s.iter().map(|w| *w as usize).collect()),
        out: Output::from_json_flag(args.race.show.json),
    })
}

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let race = Race::prepare(db, plan.settings.clone()).await?;
    let quiet = !plan.out.for_people();
    let schedule = plan.schedule.clone();
    let result = race
        .run_stepped(async |controller: &mut Controller| {
            controller.settle_all().await;
            match schedule {
                Some(schedule) => scripted(controller, &schedule, quiet).await,
                None => interactive(controller, db).await,
            }
        })
        .await?;
    plan.out
        .record(&result, |r| format!("\n{}", report::race::render(r)))?;
    plan.out.text(|| report::timeline::render(&result))
}

/// Follows the schedule, printing each step unless `quiet`.
async fn scripted(controller: &mut Controller, schedule: &[usize], quiet: bool) -> Result<()> {
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

/// Asks at the terminal which worker moves next.
async fn interactive(controller: &mut Controller, db: &Database) -> Result<()> {
    let workers = controller.standing.len();
    let mut lines = std::io::stdin().lock().lines();
    let mut turn = 1;
    while !controller.all_finished() {
        emit(&screen(controller, db, turn).await?)?;
        emit(&format!(
            "move worker (1-{workers}), a = let all run, q = quit: "
        ))?;
        let Some(line) = lines.next().transpose()? else {
            return Ok(());
        };
        match line.trim() {
            "a" | "all" => return Ok(()),
            "q" | "quit" => bail!(
                "stopped at step {turn}; the rest ran to the end so that nothing is left behind"
            ),
            choice => match choice.parse::<usize>() {
                Ok(worker) => match controller.advance(worker).await {
                    Ok(what) => {
                        emit(&format!("{}\n", strong(what)))?;
                        turn += 1;
                    }
                    Err(why) => emit(&format!("{}\n", warn(why)))?,
                },
                Err(_) => emit(&format!(
                    "{}\n",
                    warn(format!("{choice:?}: type a worker's number, a or q"))
                ))?,
            },
        }
    }
    Ok(())
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
    let keys: Vec<(String, String, Option<i32>)> =
        sqlx::query_as("SELECT key, status, worker FROM idempotency_keys ORDER BY id")
            .fetch_all(&db.meta)
            .await?;
    let xp: Vec<(i64, i32, Option<i32>)> =
        sqlx::query_as("SELECT id, amount, worker FROM experience_points ORDER BY id")
            .fetch_all(&db.meta)
            .await?;
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
