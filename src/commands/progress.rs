//! `idem progress`: the lessons read, where the file that keeps them is, and `--reset`.

use anyhow::Result;

use super::command::{Command, Given, Needs, Nothing};
use crate::lesson::LESSONS;
use crate::progress::{self, Progress};
use crate::report::emit;

/// `idem progress [--reset]`.
pub struct Shown {
    /// Forget it all instead of showing it.
    pub reset: bool,
}

impl Command for Shown {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        if self.reset {
            let said = match Progress::reset()? {
                Some(path) => format!("progress forgotten: {} removed\n", path.display()),
                None => "no progress kept: nothing to forget\n".to_string(),
            };
            return emit(&said);
        }
        let Some(path) = progress::path() else {
            return emit("no progress is kept: neither XDG_STATE_HOME nor HOME is set\n");
        };
        let kept = Progress::load()?;
        let read: Vec<String> = kept.lessons_read.iter().map(u8::to_string).collect();
        let lessons = LESSONS.len() as u8;
        let next = match kept.next(lessons) {
            Some(n) => format!("next: idem lesson {n}"),
            None => "every lesson read".to_string(),
        };
        let passed: Vec<String> = kept.exercises_passed.iter().map(u8::to_string).collect();
        let exercises = crate::exercise::EXERCISES.len();
        let predicted = kept.predictions.len();
        let right = kept
            .predictions
            .values()
            .filter(|p| super::predict::most_seen(&p.saw).is_some_and(|(n, _)| n == p.said))
            .count();
        let predictions = match predicted {
            0 => String::new(),
            n => format!("predictions right: {right} of {n}\n"),
        };
        // Everything done: the course's guard belongs on your own API now.
        let next = match (kept.next(lessons), passed.len() == exercises) {
            (None, true) => format!(
                "{next}, every exercise passed. Next, your own API: race it and count what \
                 it did,\n  idem probe http://localhost:3000/awards \\\n    \
                 --count-sql 'SELECT count(*) FROM experience_points' \\\n    \
                 --count-database-url \"$DATABASE_URL\"\n  (idem probe --help \
                 for the rest)"
            ),
            _ => next,
        };
        let listed = |list: &[String]| match list.is_empty() {
            true => String::new(),
            false => format!(" ({})", list.join(", ")),
        };
        emit(&format!(
            "lessons read: {} of {lessons}{}\nexercises passed: {} of {exercises}{}\n\
             {predictions}{next}\nkept in {}\n",
            read.len(),
            listed(&read),
            passed.len(),
            listed(&passed),
            path.display()
        ))
    }
}
