//! The seven lessons told in short screens, read from `lessons/*.md` (embedded at build time).
//!
//! A teacher edits a lesson without touching Rust. Each file is plain
//! Markdown in one fixed shape:
//!
//! ```text
//! # Title
//!
//! > The lesson in one line.
//!
//! A screen: one paragraph, wrapped as you like.
//!
//! Another screen.
//!
//! Look at: what the demonstrations show
//!
//! Try it: `idem ... (an experiment to run next)`
//! ```
//!
//! The tests parse every file, so a file that strays from the shape fails
//! the build's tests, not a learner's run.

use std::sync::LazyLock;

/// One lesson: its title, one line, a few screens, what to look at, and an experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lesson {
    pub number: u8,
    pub title: String,
    pub line: String,
    pub screens: Vec<String>,
    pub look_at: String,
    pub experiment: String,
}

/// The files, in lesson order.
const FILES: [(&str, &str); 7] = [
    (
        "lessons/1-duplicate-keys-vs-duplicate-work.md",
        include_str!("../lessons/1-duplicate-keys-vs-duplicate-work.md"),
    ),
    (
        "lessons/2-reserve-before-you-work.md",
        include_str!("../lessons/2-reserve-before-you-work.md"),
    ),
    (
        "lessons/3-what-the-loser-does.md",
        include_str!("../lessons/3-what-the-loser-does.md"),
    ),
    (
        "lessons/4-the-key-means-the-request-not-just-the-operation.md",
        include_str!("../lessons/4-the-key-means-the-request-not-just-the-operation.md"),
    ),
    (
        "lessons/5-where-the-reservation-lives.md",
        include_str!("../lessons/5-where-the-reservation-lives.md"),
    ),
    (
        "lessons/6-designing-the-key-itself.md",
        include_str!("../lessons/6-designing-the-key-itself.md"),
    ),
    (
        "lessons/7-putting-idempotency-keys-together.md",
        include_str!("../lessons/7-putting-idempotency-keys-together.md"),
    ),
];

/// The seven lessons, parsed once.
pub static LESSONS: LazyLock<Vec<Lesson>> = LazyLock::new(|| {
    FILES
        .iter()
        .zip(1..)
        .map(|((name, text), number)| {
            parse(number, text).unwrap_or_else(|why| panic!("{name}: {why}"))
        })
        .collect()
});

/// Reads one lesson file.
pub fn parse(number: u8, text: &str) -> Result<Lesson, String> {
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    let [title, line, rest @ ..] = paragraphs.as_slice() else {
        return Err("a lesson starts with `# Title` and `> one line`".into());
    };
    let title = title
        .strip_prefix("# ")
        .ok_or("the first paragraph must be `# Title`")?;
    let line = line
        .strip_prefix("> ")
        .ok_or("the second paragraph must be `> one line`")?;
    let [screens @ .., look_at, experiment] = rest else {
        return Err("a lesson ends with `Look at: ...` and `Try it: `...``".into());
    };
    let look_at = look_at
        .strip_prefix("Look at: ")
        .ok_or("the paragraph before the last must start `Look at: `")?;
    let experiment = experiment
        .strip_prefix("Try it: `")
        .and_then(|e| e.strip_suffix('`'))
        .ok_or("the last paragraph must be Try it: `a command`")?;
    if screens.is_empty() {
        return Err("a lesson has at least one screen".into());
    }
    Ok(Lesson {
        number,
        title: title.to_string(),
        line: line.to_string(),
        screens: screens.to_vec(),
        look_at: look_at.to_string(),
        experiment: experiment.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_file_has_the_shape() {
        assert_eq!(LESSONS.len(), 7);
        for (lesson, number) in LESSONS.iter().zip(1..) {
            assert_eq!(lesson.number, number);
            assert!(
                lesson.experiment.starts_with("idem ") || lesson.experiment.starts_with("cargo ")
            );
            assert!(!lesson.screens.is_empty());
        }
    }

    #[test]
    fn a_file_out_of_shape_is_refused_with_a_reason() {
        assert!(
            parse(
                1,
                "# T\n\n> L\n\nscreen\n\nLook at: x\n\nTry it: `idem race`\n"
            )
            .is_ok()
        );
        assert!(parse(1, "T\n\n> L\n\nscreen\n\nLook at: x\n\nTry it: `idem race`").is_err());
        assert!(parse(1, "# T\n\n> L\n\nLook at: x\n\nTry it: `idem race`").is_err());
        assert!(parse(1, "# T\n\n> L\n\nscreen\n\nLook: x\n\nTry it: `idem race`").is_err());
    }
}
