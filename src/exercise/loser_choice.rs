//! Lesson 3's exercise: what a loser does and its timings, judged by a client's patience, a small pool and the reads it costs.

use std::path::Path;

use anyhow::{Context, Result};

use super::spec::Exercise;
use crate::challenge::rows_and_statuses;
use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::options::{LoserInput, RaceInput};
use crate::race::{Outcome, Race, RaceResult};
use crate::strategy::StrategyKind;

/// The most a loser file may hold.
pub const MAX_LOSER_FILE_BYTES: u64 = 64 * 1024;

/// The winner's work in every case.
const WORK_MS: u64 = 300;

/// How long a client waits for its answer: the work and a little more.
pub const PATIENCE_MS: f64 = 500.0;

/// The most reads of the claim one loser may send while it waits.
pub const MOST_READS: u32 = 30;

/// How long a request waits for a pooled connection before it gives up.
const CHECKOUT_TIMEOUT_MS: u64 = 100;

/// The learner's choice: `loser`, and `poll_ms` and `wait_timeout_ms`
/// where they apply, as a scenario's `[race]` table says them.
pub struct LoserChoice(LoserInput);

impl LoserChoice {
    /// The loser file at `path`, its settings checked as a race checks them.
    pub fn load(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text = crate::files::read_text(path, MAX_LOSER_FILE_BYTES, "loser file")?;
        let input: LoserInput = crate::files::parse_toml(&name, &text)?;
        let choice = LoserChoice(input);
        choice
            .race(5, 6)
            .build(Origin::File)
            .with_context(|| name.clone())?;
        Ok(choice)
    }

    /// `workers` requests with one key on a pool of `pool` (the runner
    /// holds one), each loser doing as the file says.
    fn race(&self, workers: u64, pool: u64) -> RaceInput {
        RaceInput::with_strategy(StrategyKind::ClaimWorkComplete).with(|r| {
            r.losers = self.0.clone();
            r.shape.workers = Some(workers);
            r.app.pool_size = Some(pool);
            r.app.work_ms = Some(WORK_MS);
            r.app.checkout_timeout_ms = Some(CHECKOUT_TIMEOUT_MS);
        })
    }
}

/// Races the file's loser five at once on a roomy pool, then twenty on
/// four connections.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let choice = LoserChoice::load(file)?;
    let mut checks = Vec::new();
    let roomy = run(db, choice.race(5, 6)).await?;
    checks.push(answered(
        &roomy,
        "five at once",
        "every client gets the award in one request: 201, the winner's response, within 500 ms",
    ));
    checks.push(reads(&roomy));
    let small = run(db, choice.race(20, 5)).await?;
    checks.push(answered(&small, "twenty on four connections", "the same for twenty requests sharing four connections, each waiting at most 100 ms for one"));
    Ok(checks)
}

async fn run(db: &Database, input: RaceInput) -> Result<RaceResult> {
    let settings = input.build(Origin::File)?;
    Race::prepare(db, settings).await?.run(1).await
}

/// Every request answered 201 with the winner's response, in time.
fn answered(r: &RaceResult, case: &'static str, demands: &'static str) -> Check {
    let winner = r.reports.iter().find_map(|w| w.made_xp);
    let same = |w: &&crate::race::WorkerReport| {
        w.status == 201
            && matches!(w.outcome, Outcome::Created | Outcome::Replayed)
            && w.body.as_ref().and_then(crate::strategy::work::xp_id_of) == winner
    };
    let all_same = r.reports.iter().all(|w| same(&w));
    let slowest = r.reports.iter().map(|w| w.answer_ms).fold(0.0, f64::max);
    let passed = r.xp_rows == 1 && winner.is_some() && all_same && slowest <= PATIENCE_MS;
    // A pass counts only if the losers met a pending claim.
    super::cases::raced(
        r,
        case,
        demands,
        passed,
        format!(
            "{}; the slowest answered at {slowest:.0} ms",
            rows_and_statuses(r)
        ),
    )
}

/// No loser read the claim more than [`MOST_READS`] times.
fn reads(r: &RaceResult) -> Check {
    let most = r
        .reports
        .iter()
        .filter_map(|w| w.waited.as_ref().map(|w| w.reads))
        .max()
        .unwrap_or(0);
    Check::judged(
        "reads while waiting",
        "no loser reads the claim more than 30 times while the winner works",
        most <= MOST_READS,
        format!("the busiest loser read it {most} times"),
    )
}

/// Lesson 3's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 3,
    file: "3-the-loser.toml",
    goal: "a loser policy and timings that answer every client in one request, on a small pool too, without flooding the database with reads",
    try_it: "idem compare --losers --work-ms 300",
    start: include_str!("../../exercises/3-the-loser.toml"),
    solution: include_str!("../../exercises/solutions/3-the-loser.toml"),
    hints: [
        "Fail-fast answers 409 and leaves the waiting to the client. Which policies \
         wait inside the request, and what does each hold while it waits?",
        "Block holds a pooled connection for the whole wait: twenty requests on four \
         connections leave sixteen with none. Poll gives its connection back between \
         reads; how often it reads sets both how late it answers and how many reads \
         it sends.",
        "loser = \"poll\", a poll_ms well under the 200 ms of slack (a late read costs \
         up to one interval) and over 10 ms (300 ms of work / 30 reads), and a \
         wait_timeout_ms longer than the work: poll_ms = 25, wait_timeout_ms = 1000.",
    ],
    why: "Waiting inside the request costs something: block costs a connection for \
          the whole wait, which a small pool cannot spare; poll costs a read each \
          interval and answers up to one interval late. So the interval is a trade \
          between latency and load, and the wait must outlast the work or the loser \
          gives up with 409 anyway.",
    read: |path| LoserChoice::load(path).map(drop),
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::NOT_YET,
};
