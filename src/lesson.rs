//! The lessons told in short screens, read from `lessons/*.md` (embedded at build time).
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
//! Shows: 1-a-scenario:trace, 1-another, 1-a-scenario:runs
//!
//! Look at: what the demonstrations show
//!
//! Try it: `idem ... (an experiment to run next)`
//! ```
//!
//! `Shows:` lists the lesson's scenarios in the order the screens talk about
//! them, each with how it is shown ([`View`]); one may appear twice (run
//! once, shown twice). The tests parse every file and check the list
//! against `scenarios/`, so a file that strays fails the build's tests, not
//! a learner's run.

use std::sync::LazyLock;

/// One lesson: its title, one line, a few screens, what to look at, and an experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lesson {
    pub number: u8,
    pub title: String,
    pub line: String,
    pub screens: Vec<String>,
    /// The demonstrations, in the order they are shown.
    pub shows: Vec<Show>,
    pub look_at: String,
    pub experiment: String,
}

/// One demonstration of a lesson: a scenario, and how it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Show {
    /// The scenario's file name without `.toml`.
    pub scenario: String,
    pub view: View,
}

/// How a lesson shows a scenario, besides its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The verdict alone.
    Verdict,
    /// One race: the figures, the why sentence, the per-worker table.
    Race,
    /// One race as `Race`, and its timeline.
    Trace,
    /// The distribution over the scenario's runs.
    Runs,
    /// The race's timeline in step order (a scheduled race).
    Schedule,
    /// Step by step, beside the next scenario shown `side`.
    Side,
    /// A row of the loser policies' table, shown after the last of them.
    Losers,
    /// What each store still knows about the key, right after the race.
    Audit,
    /// A row of the lesson's matrix (`idem matrix`), shown after the last
    /// of them; the scenario itself is shown in one line.
    Matrix,
    /// An `[explore]` scenario: held and failed in how many interleavings.
    Explore,
}

impl View {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "race" => View::Race,
            "trace" => View::Trace,
            "runs" => View::Runs,
            "schedule" => View::Schedule,
            "side" => View::Side,
            "losers" => View::Losers,
            "audit" => View::Audit,
            "matrix" => View::Matrix,
            "explore" => View::Explore,
            _ => return None,
        })
    }
}

/// The files, in lesson order.
const FILES: [(&str, &str); 10] = [
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
    (
        "lessons/8-the-questions-after-the-course.md",
        include_str!("../lessons/8-the-questions-after-the-course.md"),
    ),
    (
        "lessons/9-the-requests-life.md",
        include_str!("../lessons/9-the-requests-life.md"),
    ),
    (
        "lessons/10-more-than-one-database.md",
        include_str!("../lessons/10-more-than-one-database.md"),
    ),
];

/// The lessons, parsed once.
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
    let [screens @ .., shows, look_at, experiment] = rest else {
        return Err("a lesson ends with `Shows: ...`, `Look at: ...` and `Try it: `...``".into());
    };
    let shows = shows
        .strip_prefix("Shows: ")
        .ok_or("the paragraph before `Look at:` must start `Shows: `")?
        .split(',')
        .map(|item| {
            let item = item.trim();
            let (scenario, view) = match item.split_once(':') {
                Some((s, v)) => (
                    s,
                    View::parse(v).ok_or(format!("no view {v:?} (in {item:?})"))?,
                ),
                None => (item, View::Verdict),
            };
            Ok(Show {
                scenario: scenario.to_string(),
                view,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
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
        shows,
        look_at: look_at.to_string(),
        experiment: experiment.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_file_has_the_shape() {
        assert_eq!(LESSONS.len(), 10);
        for (lesson, number) in LESSONS.iter().zip(1..) {
            assert_eq!(lesson.number, number);
            assert!(
                lesson.experiment.starts_with("idem ") || lesson.experiment.starts_with("cargo ")
            );
            assert!(!lesson.screens.is_empty());
        }
    }

    /// Every scenario of a lesson is shown, and every one shown is the lesson's.
    #[test]
    fn every_lesson_shows_exactly_its_scenarios() {
        use std::collections::BTreeSet;
        for lesson in LESSONS.iter() {
            let shown: BTreeSet<&str> = lesson.shows.iter().map(|s| s.scenario.as_str()).collect();
            let scenarios = crate::scenario::builtin::for_lesson(lesson.number).unwrap();
            let names: BTreeSet<String> = scenarios
                .iter()
                .map(|s| {
                    s.source
                        .trim_start_matches("scenarios/")
                        .trim_end_matches(".toml")
                        .to_string()
                })
                .collect();
            let names: BTreeSet<&str> = names.iter().map(String::as_str).collect();
            assert_eq!(shown, names, "lesson {}", lesson.number);
            let sides = lesson.shows.iter().filter(|s| s.view == View::Side).count();
            assert_eq!(
                sides % 2,
                0,
                "lesson {}: `side` views come in pairs",
                lesson.number
            );
        }
    }

    #[test]
    fn a_file_out_of_shape_is_refused_with_a_reason() {
        assert!(
            parse(
                1,
                "# T\n\n> L\n\nscreen\n\nShows: 1-a:race, 1-b\n\nLook at: x\n\nTry it: `idem race`\n"
            )
            .is_ok()
        );
        let shows = "Shows: 1-a";
        assert!(
            parse(
                1,
                &format!("T\n\n> L\n\nscreen\n\n{shows}\n\nLook at: x\n\nTry it: `idem race`")
            )
            .is_err()
        );
        assert!(
            parse(
                1,
                &format!("# T\n\n> L\n\n{shows}\n\nLook at: x\n\nTry it: `idem race`")
            )
            .is_err()
        );
        assert!(
            parse(
                1,
                &format!("# T\n\n> L\n\nscreen\n\n{shows}\n\nLook: x\n\nTry it: `idem race`")
            )
            .is_err()
        );
        assert!(
            parse(
                1,
                "# T\n\n> L\n\nscreen\n\nShows: 1-a:wide\n\nLook at: x\n\nTry it: `idem race`"
            )
            .is_err()
        );
        assert!(
            parse(
                1,
                "# T\n\n> L\n\nscreen\n\nLook at: x\n\nTry it: `idem race`"
            )
            .is_err()
        );
    }
}
