//! Lesson 6's exercise: a key the learner designs, judged by clients that crash and retry.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::spec::Exercise;
use crate::db::Database;
use crate::keys::{CrashPoint, KeyKind, KeyTemplate, KeysResult, KeysSettings, simulate};
use crate::probe::conformance::Check;

/// One simulation a key file is put through, and how it is judged.
type Case = (KeysSettings, fn(&KeysResult) -> Check);

/// The key file's simulations: retries after a crash, several awards per
/// user, and a reload after the response.
fn cases(template: KeyTemplate) -> Vec<Case> {
    let base = KeysSettings {
        kind: KeyKind::Random,
        template: Some(template),
        clients: 5,
        intents: 1,
        retries: 2,
        crash_at: CrashPoint::AfterWork,
        fingerprint: true,
        work: Duration::from_millis(crate::keys::DEFAULT_KEYS_WORK_MS),
    };
    vec![
        (base.clone(), retried),
        (
            KeysSettings {
                intents: 3,
                retries: 1,
                ..base.clone()
            },
            three_awards,
        ),
        (
            KeysSettings {
                crash_at: CrashPoint::AfterResponse,
                ..base
            },
            reloaded,
        ),
    ]
}

/// Runs the key file at `file` through its simulations.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let template = KeyTemplate::load(file)?;
    let mut checks = Vec::new();
    for (settings, verdict) in cases(template) {
        checks.push(verdict(&simulate(db, &settings).await?));
    }
    Ok(checks)
}

/// What a simulation left, in a few words.
fn saw(r: &KeysResult) -> String {
    let wrong = r.disagreements();
    if !wrong.is_empty() {
        let why = wrong.join("; ");
        if cfg!(debug_assertions) {
            panic!("a verdict's figures disagree with the simulation: {why}");
        }
        return format!("(idem left out what it saw: its figures disagreed: {why})");
    }
    format!(
        "{} keys for {} requests; {} XP rows for {} awards, {} merged",
        r.keys_used, r.attempts_sent, r.xp_rows, r.expected_xp_rows, r.merged_intents
    )
}

fn once_each(r: &KeysResult) -> bool {
    r.xp_rows == r.expected_xp_rows && r.duplicates == 0 && r.merged_intents == 0
}

fn retried(r: &KeysResult) -> Check {
    Check::judged(
        "crash after the work",
        "five clients crash after the server worked, restart and send again, twice: one award each",
        once_each(r),
        saw(r),
    )
}

fn three_awards(r: &KeysResult) -> Check {
    Check::judged(
        "three awards per user",
        "each client makes three different awards, each retried once: three XP rows per user",
        once_each(r),
        saw(r),
    )
}

fn reloaded(r: &KeysResult) -> Check {
    Check::judged(
        "reload after the response",
        "the answer arrived but the page reloaded before it was kept: still one award each",
        once_each(r),
        saw(r),
    )
}

/// Lesson 6's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 6,
    file: "6-the-key.toml",
    goal: "a key the client makes the same after every restart, for one award, and different for every other award",
    try_it: "idem keys --key-file {file} --intents 3",
    start: include_str!("../../exercises/6-the-key.toml"),
    solution: include_str!("../../exercises/solutions/6-the-key.toml"),
    hints: [
        "A random key is made when the client starts, and a crash starts it again. What \
         does the client still know after a restart?",
        "The award it is making: the operation, the user and the lesson. Build the key \
         from those fields, with no {random} in it.",
        "Check the other way too: would two different awards by one user ever make the same \
         key? Each field that tells two awards apart belongs in it: {user_id} and {lesson}.",
    ],
    why: "A key must name the intent, not the attempt: made from the award's own fields it \
          survives every restart, and made from all of them it never matches a different \
          award. Fewer fields merge awards; a random part forgets retries.",
    read: |path| crate::keys::KeyTemplate::load(path).map(drop),
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Left(
        "its idea is the client's key, which no engine changes: its cases race on PostgreSQL",
    ),
};
