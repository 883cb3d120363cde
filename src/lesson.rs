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
//! A paragraph `Predict: SCENARIO, FIGURE, 0-N | question | why` (any
//! number, anywhere among the screens) is not a screen: it is asked before
//! the first screen, and answered beside the scenario's figure.
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
    /// What the learner is asked to predict before the screens.
    pub predictions: Vec<Prediction>,
}

/// A question asked before a lesson shows its figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    /// The scenario whose figure answers it.
    pub scenario: String,
    pub figure: Figure,
    /// The answers offered: 0 to this (a single key).
    pub most: u8,
    pub question: String,
    /// Why the figure is what it is, shown beside the learner's answer.
    pub why: String,
}

/// A figure a learner can predict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    XpRows,
    ServiceCalls,
    /// Requests answered 409 Conflict.
    Conflicts,
    /// Replays that answered a request with another request's result.
    WrongReplays,
}

impl Figure {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "xp_rows" => Figure::XpRows,
            "service_calls" => Figure::ServiceCalls,
            "conflicts" => Figure::Conflicts,
            "wrong_replays" => Figure::WrongReplays,
            _ => return None,
        })
    }

    /// How a sentence names it, for `n` of it.
    pub fn name(self, n: u64) -> &'static str {
        match (self, n) {
            (Figure::XpRows, 1) => "XP row",
            (Figure::XpRows, _) => "XP rows",
            (Figure::ServiceCalls, 1) => "service call",
            (Figure::ServiceCalls, _) => "service calls",
            (Figure::Conflicts, _) => "answered 409",
            (Figure::WrongReplays, 1) => "wrong replay",
            (Figure::WrongReplays, _) => "wrong replays",
        }
    }
}

/// Reads `SCENARIO, FIGURE, 0-N | question | why`.
fn prediction(text: &str) -> Result<Prediction, String> {
    let parts: Vec<&str> = text.split(" | ").map(str::trim).collect();
    let [head, question, why] = parts.as_slice() else {
        return Err(format!("`Predict: {text}` needs `head | question | why`"));
    };
    let head: Vec<&str> = head.split(',').map(str::trim).collect();
    let [scenario, figure, range] = head.as_slice() else {
        return Err(format!("`Predict: {text}` starts `SCENARIO, FIGURE, 0-N`"));
    };
    let most = range
        .strip_prefix("0-")
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| (1..=9).contains(n))
        .ok_or(format!(
            "{range:?}: the answers are 0-N, N from 1 to 9 (one key)"
        ))?;
    Ok(Prediction {
        scenario: scenario.to_string(),
        figure: Figure::parse(figure).ok_or(format!("no figure {figure:?}"))?,
        most,
        question: question.to_string(),
        why: why.to_string(),
    })
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
const FILES: [(&str, &str); 11] = [
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
    (
        "lessons/11-more-than-one-primary.md",
        include_str!("../lessons/11-more-than-one-primary.md"),
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
    let (asked, screens): (Vec<&String>, Vec<&String>) =
        screens.iter().partition(|p| p.starts_with("Predict: "));
    let predictions = asked
        .iter()
        .map(|p| prediction(&p["Predict: ".len()..]))
        .collect::<Result<Vec<_>, _>>()?;
    if screens.is_empty() {
        return Err("a lesson has at least one screen".into());
    }
    Ok(Lesson {
        number,
        title: title.to_string(),
        line: line.to_string(),
        screens: screens.into_iter().cloned().collect(),
        shows,
        look_at: look_at.to_string(),
        experiment: experiment.to_string(),
        predictions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_file_has_the_shape() {
        assert_eq!(LESSONS.len(), 11);
        for (lesson, number) in LESSONS.iter().zip(1..) {
            assert_eq!(lesson.number, number);
            assert!(
                lesson.experiment.starts_with("idem ") || lesson.experiment.starts_with("cargo ")
            );
            assert!(!lesson.screens.is_empty());
        }
    }

    /// Every lesson asks for a prediction, about a scenario it shows, and
    /// the answer its "why" gives first is the figure the scenario expects.
    #[test]
    fn every_lesson_asks_and_its_answer_is_the_scenarios_figure() {
        let words = ["zero", "one", "two", "three", "four", "five"];
        for lesson in LESSONS.iter() {
            assert!(!lesson.predictions.is_empty(), "lesson {}", lesson.number);
            for p in &lesson.predictions {
                assert!(
                    lesson.shows.iter().any(|s| s.scenario == p.scenario),
                    "{p:?}"
                );
                let scenarios = crate::scenario::builtin::for_lesson(lesson.number).unwrap();
                let scenario = scenarios
                    .iter()
                    .find(|s| s.source.ends_with(&format!("/{}.toml", p.scenario)))
                    .unwrap();
                let e = &scenario.expect;
                let expected = match p.figure {
                    Figure::XpRows => e.xp_rows,
                    Figure::ServiceCalls => e.service_calls,
                    Figure::Conflicts => {
                        e.outcomes.as_ref().and_then(|o| o.get("conflict").copied())
                    }
                    Figure::WrongReplays => e.wrong_replays,
                }
                .unwrap_or_else(|| panic!("{} expects no figure for {p:?}", p.scenario));
                let said = p.why.split(':').next().unwrap().to_ascii_lowercase();
                let said = words.iter().position(|w| *w == said).unwrap_or(99) as u64;
                assert_eq!(said, expected, "{p:?}");
                assert!(expected <= u64::from(p.most), "{p:?}");
            }
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
