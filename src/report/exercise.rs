//! What `idem exercise`, `idem check` and `idem hint` say: the file written, the verdict's last word, a hint.

use std::path::Path;

use super::style::{dim, good, strong};
use super::table::wrap_cell;
use crate::exercise::Exercise;

/// The width a hint's paragraph is wrapped to.
const WIDTH: usize = 78;

/// A paragraph wrapped to the screen, each line indented by `indent`.
fn paragraph(text: &str, indent: &str) -> String {
    wrap_cell(text, WIDTH - indent.len())
        .lines()
        .map(|line| format!("{indent}{line}\n"))
        .collect()
}

/// The exercise's file is written: what to do with it next.
pub fn written(e: &Exercise, path: &Path, try_it: &str) -> String {
    let path = path.display();
    // Each command broken before a flag with ` \`, so that it pastes whole
    // from a screen of any width.
    let try_it = try_it.replace("{file}", &path.to_string());
    format!(
        "{} {path}\n\n{}\n{}\n{}\n{}\n  idem check {} {path}\n  idem hint {}\n",
        strong("wrote"),
        strong(format!("Lesson {}'s exercise", e.lesson)),
        paragraph(&format!("Goal: {}.", e.goal), "  "),
        dim("See what it does, judge it, and ask for a hint when stuck:"),
        super::width::shell_lines(&try_it, super::width::width()),
        e.lesson,
        e.lesson,
    )
}

/// The reference answer is written beside the learner's file.
pub fn solution_written(e: &Exercise, path: &Path) -> String {
    format!(
        "{} {}: a reference answer to lesson {}'s exercise (idem check {} {} passes it)\n",
        strong("wrote"),
        path.display(),
        e.lesson,
        e.lesson,
        path.display()
    )
}

/// Every case held.
pub fn passed(e: &Exercise) -> String {
    format!(
        "{} Why it works: idem hint {}\n",
        good(format!("Passed: lesson {}'s exercise is done.", e.lesson)),
        e.lesson
    )
}

/// Hint `shown` (from 1) of an exercise's three.
pub fn hint(e: &Exercise, shown: usize) -> String {
    let last = if shown == e.hints.len() {
        format!(
            "\n{}",
            dim(format!(
                "That was the last hint. A reference answer: idem exercise {} --solution\n",
                e.lesson
            ))
        )
    } else {
        format!(
            "\n{}",
            dim(format!("The next one: idem hint {}\n", e.lesson))
        )
    };
    format!(
        "{}\n{}{last}",
        strong(format!(
            "Lesson {}, hint {shown} of {}",
            e.lesson,
            e.hints.len()
        )),
        paragraph(e.hints[shown - 1], "  ")
    )
}

/// The hints seen so far, again.
pub fn hints_again(e: &Exercise, seen: usize) -> String {
    if seen == 0 {
        return format!(
            "no hint seen yet for lesson {}: idem hint {}\n",
            e.lesson, e.lesson
        );
    }
    (1..=seen)
        .map(|n| {
            format!(
                "{}\n{}",
                strong(format!("hint {n} of {}", e.hints.len())),
                paragraph(e.hints[n - 1], "  ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// After a pass: why the answer works.
pub fn why(e: &Exercise) -> String {
    format!(
        "{}\n{}",
        strong(format!(
            "Lesson {}'s exercise passed. Why it works:",
            e.lesson
        )),
        paragraph(e.why, "  ")
    )
}
