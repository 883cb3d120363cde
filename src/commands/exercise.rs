//! `idem exercise N`: lesson N's guard file written into a folder, never over a file that is there.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use super::command::{Command, Given, Needs, Nothing};
use crate::cli::teaching::ExerciseArgs;
use crate::exercise::spec::OnMariadb;
use crate::exercise::{Exercise, for_lesson, none_for};
use crate::progress::Progress;
use crate::race::engine::Engine;
use crate::report::{emit, exercise as said};

/// The file to write, and where.
pub struct Write {
    exercise: &'static Exercise,
    solution: bool,
    /// How to see it, the start and the answer, on the engine asked for.
    files: (&'static str, &'static str, &'static str),
    dir: PathBuf,
}

/// The solution is shown once it can teach no longer spoil: after a pass,
/// or once every hint has been asked for.
fn solution_earned(e: &Exercise) -> Result<()> {
    let progress = Progress::load().unwrap_or_default();
    let seen = usize::from(progress.hints(e.lesson));
    if progress.exercises_passed.contains(&e.lesson) || seen >= e.hints.len() {
        return Ok(());
    }
    let n = e.lesson;
    bail!(
        "the solution comes after you pass (idem check {n}) or after the last hint \
         (idem hint {n}: {} of {} seen); try the idea first",
        seen,
        e.hints.len()
    )
}

pub fn plan(args: &ExerciseArgs) -> Result<Write> {
    let n = args.number as u8;
    let exercise = for_lesson(n).ok_or_else(|| anyhow!(none_for(n)))?;
    let own = (exercise.try_it, exercise.start, exercise.solution);
    let files = match (args.engine.unwrap_or(exercise.engine), &exercise.mariadb) {
        (asked, _) if asked == exercise.engine => own,
        (Engine::Mariadb, OnMariadb::Files(on)) => (on.try_it, on.start, on.solution),
        (Engine::Mariadb, OnMariadb::Left(why)) => {
            bail!("exercise {n} has no file for MariaDB: {why} (leave out --engine)")
        }
        (Engine::Mariadb, OnMariadb::Own) => own,
        (Engine::Postgres, _) => bail!(
            "exercise {n} is judged on a Galera cluster of MariaDB nodes only: its idea is more \
             than one primary, which PostgreSQL has not (leave out --engine)"
        ),
    };
    Ok(Write {
        exercise,
        solution: args.solution,
        files,
        dir: args.dir.clone().unwrap_or_else(|| PathBuf::from(".")),
    })
}

impl Command for Write {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let e = self.exercise;
        if self.solution {
            solution_earned(e)?;
        }
        let (name, text) = match self.solution {
            true => (e.solution_file(), self.files.2),
            false => (e.file.to_string(), self.files.1),
        };
        let path = match self.dir.as_os_str() == "." {
            true => PathBuf::from(&name),
            false => self.dir.join(&name),
        };
        // Anything already there (the learner's work) is never touched.
        if !crate::files::write::create_new(&path, text.as_bytes(), "the exercise")? {
            bail!(
                "{} is there already, and idem never writes over it; check it with \
                 idem check {} {}, or move it away",
                path.display(),
                e.lesson,
                path.display()
            );
        }
        emit(&match self.solution {
            true => said::solution_written(e, &path),
            false => said::written(e, &path, self.files.0),
        })
    }
}
