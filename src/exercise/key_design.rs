//! Lesson 6's exercise: a key the learner designs, judged by clients that crash and retry.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

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
