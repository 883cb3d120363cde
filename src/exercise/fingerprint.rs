//! Lesson 4's exercise: a fingerprint the file computes itself, judged by requests that differ in one field each.

use std::path::Path;

use anyhow::Result;

use super::spec::Exercise;
use crate::challenge::rows_and_statuses;
use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::told::{Fact, Told, Who, tell};
use crate::race::{Outcome, Race, RaceResult, WorkerReport};
use crate::strategy::guard_file::{self, StepName};

/// One race: five requests on one key, asking for these amounts, lessons
/// and users (empty: all the same), and what the case demands.
struct Asked {
    case: &'static str,
    demands: &'static str,
    amounts: &'static [i32],
    lessons: &'static [i32],
    users: &'static [i64],
}

/// A field left out of the fingerprint fails one case; fields run
/// together without a separator fail the last one (12 and 3 read as 1
/// and 23).
const CASES: [Asked; 4] = [
    Asked {
        case: "other amounts",
        demands: "10, 20, 10, 30 and 10 XP on one key: one award, and 422 for every request \
                  that asks another amount than the winner's",
        amounts: &[10, 20, 10, 30, 10],
        lessons: &[],
        users: &[],
    },
    Asked {
        case: "other lessons",
        demands: "lessons 1, 2, 1, 3 and 1 on one key: 422 for every request for another \
                  lesson than the winner's",
        amounts: &[],
        lessons: &[1, 2, 1, 3, 1],
        users: &[],
    },
    Asked {
        case: "other users",
        demands: "users 42, 7, 42, 9 and 42 on one key: 422 for every request of another user \
                  than the winner's",
        amounts: &[],
        lessons: &[],
        users: &[42, 7, 42, 9, 42],
    },
    Asked {
        case: "fields run together",
        demands: "12 XP for lesson 3 and 1 XP for lesson 23 on one key: 422 for whichever came second",
        amounts: &[12, 1, 12, 1, 12],
        lessons: &[3, 23, 3, 23, 3],
        users: &[],
    },
];

/// Whether the file computes its own fingerprint, then each case raced once.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let guard = guard_file::load(file)?;
    let own = guard.statement(StepName::Fingerprint).is_some();
    let mut checks = vec![Check::judged(
        "the file's own fingerprint",
        "a fingerprint step computes it from $user_id, $amount and $lesson",
        own,
        match own {
            true => "the file has a fingerprint step".to_string(),
            false => "no fingerprint step: $fingerprint was idem's, not the file's".to_string(),
        },
    )];
    for asked in &CASES {
        let input = super::cases::base(file).with(|r| {
            let list = |v: &[i32]| (!v.is_empty()).then(|| v.to_vec());
            r.amounts.amounts = list(asked.amounts);
            r.amounts.lessons = list(asked.lessons);
            r.amounts.users = (!asked.users.is_empty()).then(|| asked.users.to_vec());
        });
        let r = Race::prepare(db, input.build(Origin::Flags)?)
            .await?
            .run(1)
            .await?;
        checks.push(told_apart(&r, asked));
    }
    Ok(checks)
}

/// One award for the winner's request; 422 for every request that asks for
/// something else, and never for one that asks the same.
fn told_apart(r: &RaceResult, asked: &Asked) -> Check {
    let winner = r.reports.iter().find(|w| w.outcome == Outcome::Created);
    let wrong = winner.and_then(|winner| {
        r.reports
            .iter()
            .filter(|w| w.worker != winner.worker)
            .find(|w| {
                let other = w.params != winner.params;
                (w.status == 422) != other
            })
    });
    let passed = r.xp_rows == 1 && winner.is_some() && wrong.is_none() && r.wrong_replays == 0;
    // Who won decides which requests were "other": the case names it.
    let mut said = Told::new();
    match winner {
        Some(w) => {
            said.push("; ");
            said.append(request(w, "won"));
        }
        None => said.push("; no request won"),
    }
    if let Some(w) = wrong {
        said.push("; ");
        said.append(request(w, "was told"));
    }
    let saw = format!("{}{}", rows_and_statuses(r), said.finish(r));
    Check::judged(asked.case, asked.demands, passed, saw)
}

/// "worker 3's request (10 XP, lesson 1, user 42) won", or "... was
/// told 409": the worker a fact, its answer read off its report.
fn request(w: &WorkerReport, did: &str) -> Told {
    let p = &w.params;
    let mut told = Told::new();
    let worker = Fact::Worker(w.worker, Who::Ended(w.outcome));
    let answer = match did {
        "won" => "won".to_string(),
        _ => format!("{did} {}", w.status),
    };
    tell!(
        told,
        "worker {}'s request ({} XP, lesson {}, user {}) {}",
        worker,
        p.amount.to_string(),
        p.lesson.to_string(),
        p.user_id.to_string(),
        answer
    );
    told
}

/// Lesson 4's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 4,
    file: "4-fingerprint.toml",
    goal: "a fingerprint, computed in SQL, that tells apart every two requests asking for different things",
    try_it: "idem race --strategy-file {file} --pool-size 6 --amounts 10,20,10,30,10",
    start: include_str!("../../exercises/4-fingerprint.toml"),
    solution: include_str!("../../exercises/solutions/4-fingerprint.toml"),
    hints: [
        "The fingerprint step's result is all a loser compares. Two requests that ask \
         for different things must get different results; which of what a request asks \
         does md5($operation) leave out?",
        "Put every field in: $operation, $user_id, $amount and $lesson. Then try the \
         last case by hand: does 12 XP for lesson 3 read differently from 1 XP for \
         lesson 23 in what you hash?",
        "Keep the fields apart with a separator before hashing: \
         md5(concat_ws('|', $operation, $user_id, $amount, $lesson)).",
    ],
    why: "A fingerprint is a name for everything the request asks, so two requests get \
          the same one only when they ask the same thing. Leave out a field and a \
          request that differs only there is taken for a retry; run the fields together \
          and two different requests can spell the same text. The claim stores it, so \
          every later request with the key compares against the first one's.",
    read: super::spec::read_guard_file,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::NOT_YET,
};
