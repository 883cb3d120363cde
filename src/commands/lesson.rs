//! `idem lessons`, `idem lesson N`, `idem tour`: the course told, with its demonstrations run live.

use std::io::{BufRead, IsTerminal};

use anyhow::Result;

use crate::db::Database;
use crate::lesson::{LESSONS, Lesson};
use crate::report::style::{dim, strong};
use crate::report::{emit, table};
use crate::scenario::{self, Scenario, builtin};

pub fn list() -> Result<()> {
    let rows = LESSONS
        .iter()
        .map(|l| {
            vec![
                l.number.to_string(),
                l.title.to_string(),
                l.line.to_string(),
            ]
        })
        .collect();
    emit(&format!(
        "{}\n",
        table::render(&["", "lesson", "in one line"], rows, &[0])
    ))
}

/// The lessons with their scenarios, loaded before any database starts.
pub fn plan(numbers: &[u8]) -> Result<Vec<(&'static Lesson, Vec<Scenario>)>> {
    numbers
        .iter()
        .map(|n| Ok((&LESSONS[usize::from(*n) - 1], builtin::for_lesson(*n)?)))
        .collect()
}

pub async fn tell(
    lessons: &[(&'static Lesson, Vec<Scenario>)],
    no_pause: bool,
    db: &Database,
) -> Result<()> {
    let pause = !no_pause && std::io::stdin().is_terminal();
    for (lesson, scenarios) in lessons {
        emit(&format!(
            "\n{}\n\n",
            strong(format!("Lesson {}: {}", lesson.number, lesson.title))
        ))?;
        for screen in &lesson.screens {
            emit(&format!("{}\n\n", wrap(screen, 78)))?;
            wait(pause)?;
        }
        emit(&format!(
            "{}\n\n",
            dim(format!(
                "Running the lesson's demonstrations. Look at {}.",
                lesson.look_at
            ))
        ))?;
        for s in scenarios {
            emit(&format!("{}\n", wrap(s.explain.trim(), 78)))?;
            let verdict = scenario::run(db, s).await?;
            emit(&format!(
                "{}\n",
                crate::report::scenario::render_verdict(&verdict)
            ))?;
        }
        emit(&format!("{} {}\n", strong("Try it:"), lesson.experiment))?;
        wait(pause)?;
    }
    Ok(())
}

fn wait(pause: bool) -> Result<()> {
    if pause {
        emit(&dim("(Enter to go on) ").to_string())?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
    }
    Ok(())
}

/// Wraps text at `width` columns, keeping paragraphs.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}
