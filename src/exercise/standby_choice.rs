//! Lesson 10's exercise: a guard, where its reads go and what its commits wait for, judged by a lagging standby and a failover.

use std::path::Path;

use anyhow::{Context, Result};

use super::spec::Exercise;
use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::options::{Failover, RaceInput, ReadFrom, Synchronous};
use crate::race::told::{Counted, Fact, Told, tell};
use crate::race::{Race, RaceResult};

/// How far behind the standby applies commits in the lagging case.
const LAG_MS: u64 = 200;

/// The learner's guard file, raced as this app runs: its finds and reads
/// on a hot standby beside the primary (a reading role, as lesson 10's
/// app has), its commits waiting for what the file's `synchronous` says.
#[derive(Debug, Clone)]
pub struct StandbyGuard {
    path: std::path::PathBuf,
}

impl StandbyGuard {
    /// The guard file at `path`, checked as a race checks its settings.
    pub fn load(path: &Path) -> Result<Self> {
        let guard = Self {
            path: path.to_path_buf(),
        };
        for input in [guard.lagging(), guard.failing_over()] {
            input
                .build(Origin::File)
                .with_context(|| path.display().to_string())?;
        }
        Ok(guard)
    }

    /// Five requests with one key, a hot standby beside the primary, the
    /// reads on it.
    fn race(&self) -> RaceInput {
        RaceInput::default().with(|r| {
            r.strategy.strategy_file = Some(self.path.clone());
            r.standby.standby = true;
            r.standby.read_from = Some(ReadFrom::Standby);
        })
    }

    /// The standby applies each commit [`LAG_MS`] late.
    fn lagging(&self) -> RaceInput {
        self.race()
            .with(|r| r.standby.replica_delay_ms = Some(LAG_MS))
    }

    /// After the race, the link is cut mid-flight, the standby promoted,
    /// and an answered request sent again to it.
    fn failing_over(&self) -> RaceInput {
        self.race()
            .with(|r| r.standby.failover = Some(Failover::AfterComplete))
    }
}

/// Races the file's choice beside a lagging standby, then through a failover.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let guard = StandbyGuard::load(file)?;
    let lagging = run(db, guard.lagging()).await?;
    let failed_over = run(db, guard.failing_over()).await?;
    Ok(vec![one_award(&lagging), key_kept(&failed_over)])
}

async fn run(db: &Database, input: RaceInput) -> Result<RaceResult> {
    let settings = input.build(Origin::File)?;
    Race::prepare(db, settings).await?.run(1).await
}

fn one_award(r: &RaceResult) -> Check {
    Check::judged(
        "a standby 200 ms behind",
        "five at once with a lagging standby beside the primary: 1 XP row, 1 service call",
        r.xp_rows == 1 && r.service_calls == 1,
        crate::challenge::rows_and_calls(r),
    )
}

fn key_kept(r: &RaceResult) -> Check {
    const CASE: &str = "failover after a 201";
    const DEMANDS: &str = "the primary fails with WAL on the link; the promoted standby still \
                           has the answered key, and the retry is replayed: 1 service call";
    let Some(f) = &r.failover else {
        return Check::not_applicable(CASE, DEMANDS, "no failover happened".to_string());
    };
    let mut told = Told::new();
    tell!(
        told,
        "{} bytes of WAL lost at the cut; the key {}; {}",
        f.wal_lost_bytes.to_string(),
        match f.acknowledged_key_lost {
            true => "was gone on the new primary",
            false => "was there on the new primary",
        },
        Counted(Fact::ServiceCalls(r.service_calls), "service call")
    );
    let saw = told.finish(r);
    let passed = !f.acknowledged_key_lost && r.service_calls == 1;
    let synchronous = r.standby.map_or(Synchronous::Off, |s| s.synchronous);
    if passed && f.untested(synchronous) {
        return Check::not_applicable(
            CASE,
            DEMANDS,
            format!("nothing was on the link when it was cut; {saw}"),
        );
    }
    Check::judged(CASE, DEMANDS, passed, saw)
}

/// Lesson 10's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 10,
    file: "10-the-standby.toml",
    goal: "a guard that keeps one award with a lagging standby beside it, and keeps an answered key through a failover",
    try_it: "idem race --strategy-file {file} --standby --read-from standby \
             --replica-delay-ms 200",
    start: include_str!("../../exercises/10-the-standby.toml"),
    solution: include_str!("../../exercises/solutions/10-the-standby.toml"),
    hints: [
        "Two cases, two questions. With the standby 200 ms behind, what decides who \
         works: a read, or a write? And when the primary fails, what had a commit \
         waited for before the client was told 201?",
        "A find can read stale data wherever it goes; a claim is an INSERT, and the \
         unique index on the primary decides. For the failover, a commit that waits \
         for the primary alone can be acknowledged and then lost with it.",
        "shape = \"claim-work-complete\" with a claim that is an INSERT ... ON CONFLICT \
         DO NOTHING RETURNING id (the reads then only choose what a loser answers, so they \
         may stay on the standby), and synchronous = \"remote_apply\": a commit returns \
         once the standby has applied it.",
    ],
    why: "A guard that decides by writing does not care how stale its reads are: the \
          primary's unique index lets one claim in. But the guard's memory is only as \
          durable as its commit: asynchronous replication acknowledges a key the \
          standby may never get, and a failover then forgets it. remote_apply makes \
          every 201 a promise the standby keeps, for a round trip per commit.",
    read: |path| StandbyGuard::load(path).map(drop),
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Left(
        "its idea is a PostgreSQL standby, a copy that applies the primary's commits late; MariaDB's is lesson 11's cluster, whose exercise is idem exercise 11",
    ),
};
