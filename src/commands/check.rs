//! `idem check N [FILE]`: a guard file raced with lesson N's cases, exit 1 until every case holds; `check 7 --url` is the challenge over HTTP.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use super::challenge::{AtUrl, Challenge};
use super::command::{Command, Given, Needs, Nothing};
use crate::cli::teaching::CheckArgs;
use crate::db::{ConnectOptions, Database};
use crate::exercise::{self, Exercise, for_lesson, none_for};
use crate::probe::conformance::Mark;
use crate::progress::Progress;
use crate::report::challenge::render_checks;
use crate::report::{Output, exercise as said};

/// What `idem check` judges: a file in-process, or an app at a URL.
pub enum Planned {
    File(Box<CheckFile>),
    AtUrl(UrlChecked),
}

/// Lesson 7's challenge over HTTP, kept in the progress when it passes.
pub struct UrlChecked {
    at_url: Box<AtUrl>,
    /// Whether a pass is kept (not for `--json`).
    keep: bool,
}

impl Command for UrlChecked {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        self.at_url.needs()
    }

    async fn run(self, on: &Nothing, given: Given) -> Result<()> {
        (*self.at_url).run(on, given).await?;
        if self.keep {
            Progress::passed(7);
        }
        Ok(())
    }
}

/// A learner's guard file and the lesson whose cases judge it.
pub struct CheckFile {
    exercise: &'static Exercise,
    file: PathBuf,
    out: Output,
    db: ConnectOptions,
}

/// Checks the arguments, and reads the file, before any database starts.
pub fn plan(args: &CheckArgs) -> Result<Planned> {
    let n = args.number as u8;
    if args.judge.starter.is_some() {
        bail!("--starter writes the challenge's starting point: idem challenge --starter ruby");
    }
    if args.judge.url.is_some() {
        if n != 7 {
            bail!("--url judges an app with lesson 7's challenge: idem check 7 --url URL");
        }
        if let Some(file) = &args.file {
            bail!("--url judges the app at the URL; drop {}", file.display());
        }
        return match super::challenge::plan(&args.judge)? {
            Challenge::AtUrl(at_url) => Ok(Planned::AtUrl(UrlChecked {
                at_url,
                keep: !args.judge.json,
            })),
            Challenge::InProcess(_) | Challenge::Starter(_) => {
                bail!("--url names no app to judge")
            }
        };
    }
    if args.judge.count.count_sql.is_some() {
        bail!("--count-sql counts an app's effects over HTTP; add --url");
    }
    let exercise = for_lesson(n).ok_or_else(|| anyhow!(none_for(n)))?;
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(exercise.file));
    if args.file.is_none() && !file.exists() {
        bail!(
            "no {} here; write it with idem exercise {n}, or name your file: idem check {n} FILE",
            exercise.file
        );
    }
    exercise::read(n, &file)?;
    // A guard file for MariaDB is judged there only by an exercise that
    // has cases on MariaDB.
    let for_mariadb = crate::strategy::guard_file::load(&file)
        .is_ok_and(|g| g.engine == crate::strategy::guard_file::Dialect::Mariadb);
    if let (true, crate::exercise::spec::OnMariadb::Left(why)) = (for_mariadb, &exercise.mariadb) {
        bail!(
            "{} is written for MariaDB, and exercise {n} has none there: {why}",
            file.display()
        );
    }
    Ok(Planned::File(Box::new(CheckFile {
        exercise,
        file,
        out: Output::from_json_flag(args.judge.json),
        db: args.judge.connect.options(),
    })))
}

impl Command for CheckFile {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone()).verdict()
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        let (e, out) = (self.exercise, self.out);
        let checks = exercise::judge(db, e.lesson, &self.file).await?;
        for check in &checks {
            out.record(check, |_| String::new())?;
        }
        let title = format!("idem check {} · {}", e.lesson, self.file.display());
        out.text(|| render_checks(&title, &checks))?;
        let failed = checks.iter().filter(|c| c.mark == Mark::Fail).count();
        let unjudged = checks
            .iter()
            .filter(|c| c.mark == Mark::NotApplicable)
            .count();
        let judged = checks.len() - unjudged;
        let unjudged_said = match unjudged {
            0 => String::new(),
            n => format!(" ({n} more could not be judged here)"),
        };
        if failed > 0 {
            bail!(
                "{failed} of {judged} cases did not hold{unjudged_said}; a hint: idem hint {}",
                e.lesson
            );
        }
        if unjudged > 0 {
            bail!(
                "the {judged} cases judged hold, but {unjudged} could not be judged here: \
                 not a pass"
            );
        }
        if out.for_people() {
            Progress::passed(e.lesson);
        }
        out.text(|| said::passed(e))
    }
}
