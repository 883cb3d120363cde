//! `idem hint N`: the next of an exercise's hints, kept in the progress; after a pass, why the answer works.

use anyhow::{Result, anyhow};

use super::command::{Command, Given, Needs, Nothing};
use crate::cli::teaching::HintArgs;
use crate::exercise::{Exercise, for_lesson, none_for};
use crate::progress::Progress;
use crate::report::{emit, exercise as said};

/// The exercise, and whether to show the hints seen again.
pub struct Hint {
    exercise: &'static Exercise,
    again: bool,
}

pub fn plan(args: &HintArgs) -> Result<Hint> {
    let n = args.number as u8;
    let exercise = for_lesson(n).ok_or_else(|| anyhow!(none_for(n)))?;
    Ok(Hint {
        exercise,
        again: args.again,
    })
}

impl Command for Hint {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let e = self.exercise;
        // A progress file that is not idem's is left alone: the hints
        // start from the first, and nothing is kept.
        let progress = Progress::load().unwrap_or_default();
        let seen = usize::from(progress.hints(e.lesson)).min(e.hints.len());
        if self.again {
            return emit(&said::hints_again(e, seen));
        }
        if progress.exercises_passed.contains(&e.lesson) {
            return emit(&said::why(e));
        }
        let shown = (seen + 1).min(e.hints.len());
        if shown > seen {
            Progress::saw_hints(e.lesson, shown as u8);
        }
        emit(&said::hint(e, shown))
    }
}
