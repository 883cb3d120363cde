//! Every interleaving: a guard's requests run step by step in every order their steps can take, each order from fresh tables, and the guard judged on each; no timing enters the verdict.
//!
//! As PostgreSQL's isolation tester runs every permutation of its
//! sessions' steps, the explorer walks every schedule of the race's
//! workers (see `tree.rs`), driving them with `idem step`'s controller: one
//! step at a time, a step that waits on a lock recorded as waiting while
//! the others move. What each schedule left (`verdict.rs`) is counted; the
//! shortest failing schedule (fewest steps, then fewest switches between
//! workers) is kept to be shown and replayed with `idem step --schedule`.

mod stepped;
mod tree;
pub mod verdict;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Serialize;

pub use stepped::Ran;
pub use tree::switches;

use stepped::{OnMariadb, Stepped};
use tree::{Choice, Walk};
pub use verdict::Failure;

use crate::db::Database;
use crate::db::mariadb::Mariadb;
use crate::race::engine::Engine;
use crate::race::mariadb::MariadbRace;
use crate::race::moves::Move;
use crate::race::stepper::{Controller, Standing};
use crate::race::{Race, RaceSettings};
use crate::request::Step;
use crate::strategy::StrategyKind;

/// Requests explored unless told otherwise: two, whose every interleaving
/// fits in seconds.
pub const WORKERS: u64 = 2;

/// How long the work takes unless told otherwise, in ms. A step runs
/// alone, so the work's length changes no order and no verdict (unless a
/// heartbeat renews the claim while it runs); without it a walk is mostly
/// waiting: check-then-store's 70 orders take 0.2 s instead of 3.
pub const WORK_MS: u64 = 0;

/// The settings of an exploration: a stepped race of [`WORKERS`] requests
/// whose work takes [`WORK_MS`], unless the input says otherwise.
pub fn settings(input: &crate::race::options::RaceInput) -> Result<RaceSettings> {
    let settings = input_of(input).build_stepped()?;
    if settings.store_kind() == crate::store::StoreKind::Cache {
        bail!(
            "--store cache writes its claim in one step here (BEGIN, SELECT ... FOR UPDATE, the \
             upsert and COMMIT), so no walk can put another request between them and every \
             order would hold: race it instead (idem race --store cache)"
        );
    }
    Ok(settings)
}

/// `input` with an exploration's defaults: [`WORKERS`] requests whose work
/// takes [`WORK_MS`], unless it says otherwise.
pub fn input_of(input: &crate::race::options::RaceInput) -> crate::race::options::RaceInput {
    input.clone().with(|r| {
        r.shape.workers = r.shape.workers.or(Some(WORKERS));
        if r.guard.heartbeat_ms.is_none() {
            r.app.work_ms = r.app.work_ms.or(Some(WORK_MS));
        }
    })
}

/// The `idem step` command line (without its schedule) that replays one
/// of `settings`'s interleavings: for `-s NAME` or `--strategy-file FILE`.
pub fn replay_for(guard: &str, settings: &RaceSettings) -> String {
    format!(
        "idem step {guard} --workers {} --work-ms {}",
        settings.requests().workers(),
        settings.work_ms()
    )
}

/// The most interleavings one exploration runs unless told otherwise.
pub const DEFAULT_BOUND: u64 = crate::limits::MAX_INTERLEAVINGS.default();

/// How often, while a step runs, the explorer asks the server whether it
/// waits on a lock: a person stepping by hand needs no haste; a walk of
/// hundreds of interleavings does.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// How long the explorer waits, at a turn where no worker is free, for a
/// lock wait to end (a deadlock is broken by the server within a second).
const STALL: Duration = Duration::from_secs(30);

/// The moves besides the workers' steps that a walk branches on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Branches {
    /// At every turn, also: a worker's server process killed before its
    /// next step (lesson 7's crash), once a run; a crashed request is
    /// retried once the race is over, after the clock has made its claim
    /// stale.
    pub crashes: bool,
    /// At every turn where it would age a pending claim, also: the clock
    /// moved past the stale-claim age (lessons 7 and 9), once a run.
    pub clock: bool,
}

/// How to walk: up to how many interleavings, on which branches, and the
/// `idem step` command line (without its schedule) that replays one.
#[derive(Debug, Clone)]
pub struct Walking {
    pub bound: u64,
    pub branches: Branches,
    pub replay: String,
}

impl Walking {
    /// A walk of the workers' steps alone, up to [`DEFAULT_BOUND`].
    pub fn steps(replay: &str) -> Walking {
        Walking {
            bound: DEFAULT_BOUND,
            branches: Branches::default(),
            replay: replay.to_string(),
        }
    }
}

/// What an exploration found.
#[derive(Debug, Clone, Serialize)]
pub struct Exploration {
    /// The engine the requests ran on.
    pub engine: Engine,
    /// On a Galera cluster, its nodes (each request on one of its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// The strategy; with a guard file, the built-in of the file's shape.
    pub strategy: StrategyKind,
    /// Where its claims lived: in Redis, the clock is their time to live
    /// running out.
    pub store: crate::store::StoreKind,
    /// The guard file explored in the strategy's place, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy_file: Option<&'static str>,
    pub workers: usize,
    /// Interleavings run, each from fresh tables.
    pub interleavings: u64,
    /// How many interleavings there are: known once the walk was whole;
    /// `null` when the bound stopped it first.
    pub total: Option<u64>,
    /// The most interleavings this exploration could run.
    pub bound: u64,
    /// The crashes and the clock, where the walk branched on them.
    pub branches: Branches,
    /// Whether steps that touch no row another request uses (checkout,
    /// begin, work) were taken as soon as they could be, each order of the
    /// others standing for every order of those: the walk of a space too
    /// large to run whole.
    pub reduced: bool,
    /// Interleavings in which the guard held.
    pub held: u64,
    /// Interleavings in which it failed, one way or more.
    pub failing: u64,
    /// Of those, the ones with neither a crash nor the clock in them.
    pub failing_on_steps_alone: u64,
    /// For each way of failing, in how many interleavings.
    pub kinds: BTreeMap<Failure, u64>,
    /// For each number of XP rows left, in how many interleavings.
    pub xp_rows: BTreeMap<u64, u64>,
    /// The shortest failing schedule, one worker number per step,
    /// `"clock"` and `"crashN"` for the branches (fewest moves, then fewest
    /// switches); `null` when none failed.
    pub shortest: Option<Vec<Move>>,
    /// What the shortest failing schedule broke.
    pub shortest_failures: Vec<Failure>,
    /// The command that replays it, step by step.
    pub replay: Option<String>,
    pub elapsed_ms: f64,
    /// The mean time of one interleaving run, its reset included, over
    /// every one run: a whole walk given up past the bound for the reduced
    /// one counts too.
    pub ms_per_interleaving: f64,
    /// The shortest failing interleaving's race, to draw it.
    #[serde(skip)]
    pub shortest_race: Option<Ran>,
}

impl Exploration {
    /// What the counts the verdict states do not bear out, each read off the
    /// exploration a second way: every interleaving run held or failed, once;
    /// every one left a number of XP rows; every failing one failed in some
    /// way, and only those; a walk said to hold in all held in every one.
    pub fn disagreements(&self) -> Vec<String> {
        let e = self;
        let mut wrong = Vec::new();
        let mut expect = |what: &str, said: u64, found: u64| {
            if said != found {
                wrong.push(format!("{what}: {said} said, {found} found"));
            }
        };
        expect("held and failing", e.held + e.failing, e.interleavings);
        expect("XP rows counted", e.xp_rows.values().sum(), e.interleavings);
        expect(
            "failing in some way",
            u64::from(e.failing > 0),
            u64::from(!e.kinds.is_empty()),
        );
        if let (0, Some(total)) = (e.failing, e.total) {
            expect("held in all", total, e.held);
        }
        if e.failing_on_steps_alone > e.failing {
            wrong.push(format!(
                "{} failing on steps alone, of {} failing",
                e.failing_on_steps_alone, e.failing
            ));
        }
        wrong
    }
}

/// Explores `settings`'s race (a stepped race: two to five workers) under
/// every interleaving, as `walking` says; `each` is told after every
/// interleaving how many have run. When the first run shows a space
/// larger than the bound, the walk is the reduced one (see
/// [`Independence`]).
pub async fn explore(
    db: &Database,
    settings: RaceSettings,
    walking: &Walking,
    each: impl FnMut(u64),
) -> Result<Exploration> {
    pool_for_every_worker(&settings)?;
    let race = Race::prepare(db, settings.clone()).await?;
    explore_on(&race, Engine::Postgres, &settings, walking, each).await
}

/// [`explore`] on MariaDB: `race` (a stepped race) on `db`'s server.
pub async fn explore_mariadb(
    db: &Mariadb,
    race: &MariadbRace,
    walking: &Walking,
    each: impl FnMut(u64),
) -> Result<Exploration> {
    pool_for_every_worker(race.settings())?;
    let on = OnMariadb { db, race };
    let mut found = explore_on(&on, Engine::Mariadb, race.settings(), walking, each).await?;
    found.nodes = race.cluster.is_cluster().then_some(race.cluster.nodes);
    Ok(found)
}

/// Refuses a race whose pool lacks a connection for any worker: a step
/// would then wait for the pool by chance.
fn pool_for_every_worker(settings: &RaceSettings) -> Result<()> {
    if !Independence::of(settings).checkout {
        bail!(
            "idem explore needs a connection for every worker, so that no step waits for the \
             pool by chance: give --pool-size {} or more",
            settings.requests().workers()
                + usize::from(settings.app().pool.runner_holds_connection())
        );
    }
    Ok(())
}

/// Walks `race`, whose settings are `settings`, as `walking` says.
async fn explore_on(
    race: &impl Stepped,
    engine: Engine,
    settings: &RaceSettings,
    walking: &Walking,
    mut each: impl FnMut(u64),
) -> Result<Exploration> {
    let (bound, replay) = (walking.bound, walking.replay.as_str());
    let began = Instant::now();
    let independence = Independence::of(settings);
    let mut reduced = false;
    // Every interleaving run, a whole walk given up for a reduced one
    // included: what the time was spent on.
    let mut ran = 0;
    let (found, complete) = loop {
        let reduce = reduced.then_some(independence);
        let branching = walking.branches.crashes || walking.branches.clock;
        let give_up_at = match (reduced, branching) {
            (false, true) => (bound / WHOLE_WITH_BRANCHES).max(1),
            _ => bound,
        };
        let how = How {
            bound,
            give_up_at,
            reduce,
            branches: walking.branches,
        };
        let (found, complete) = walk(race, how, &mut each).await?;
        ran += found.runs;
        if complete || reduced {
            break (found, complete);
        }
        // Too large to run whole: walk it reduced instead.
        reduced = true;
    };
    let elapsed_ms = began.elapsed().as_secs_f64() * 1000.0;
    let first = settings.requests();
    Ok(Exploration {
        nodes: None,
        engine,
        strategy: settings.strategy(),
        store: settings.store_kind(),
        strategy_file: settings.app().guard_file.map(|f| f.0.name.as_str()),
        workers: first.workers(),
        interleavings: found.runs,
        total: complete.then_some(found.runs),
        bound,
        branches: walking.branches,
        reduced,
        held: found.runs - found.failing,
        failing: found.failing,
        failing_on_steps_alone: found.failing_on_steps,
        kinds: found.kinds,
        xp_rows: found.xp_rows,
        replay: found
            .shortest
            .as_ref()
            .map(|(s, _, _)| format!("{replay} --schedule {}", joined(s))),
        shortest_failures: found
            .shortest
            .as_ref()
            .map(|(_, f, _)| f.clone())
            .unwrap_or_default(),
        shortest_race: found.shortest.as_ref().map(|(_, _, r)| r.clone()),
        shortest: found.shortest.map(|(s, _, _)| s),
        elapsed_ms,
        ms_per_interleaving: elapsed_ms / ran.max(1) as f64,
    })
}

/// One walk's settings: its bound, its reduction if any, its branches.
#[derive(Debug, Clone, Copy)]
struct How {
    bound: u64,
    /// A whole walk that has run this many orders without ending is given
    /// up, to be walked reduced: the bound, or less when the walk
    /// branches (see [`WHOLE_WITH_BRANCHES`]).
    give_up_at: u64,
    reduce: Option<Independence>,
    branches: Branches,
}

/// A whole walk that branches on crashes or the clock runs at most this
/// share of the bound (one in five) before it is walked reduced instead.
/// Its first run's estimate counts the steps' orders only, and the
/// branches can make the tree many times that: the guard with the clock
/// on InnoDB looked small enough to run whole, ran 5000 orders to the
/// bound (160 s), then was walked reduced in 58 (2 s); now it gives up
/// the whole walk at 1000 (35 s in all). The whole walks of the docs (766
/// orders at most, with crashes and the clock) still run whole.
const WHOLE_WITH_BRANCHES: u64 = 5;

/// One walk of the tree, whole or up to its bound: the counts, and whether
/// it was whole. A walk whose first run shows a space larger than the
/// bound stops there, to be walked reduced instead.
async fn walk(race: &impl Stepped, how: How, each: &mut impl FnMut(u64)) -> Result<(Tally, bool)> {
    let (bound, reduce) = (how.bound, how.reduce);
    let mut walk = Walk::default();
    let mut found = Tally::default();
    loop {
        let result = race
            .stepped(async |controller: &mut Controller| drive(controller, &mut walk, how).await)
            .await?;
        let schedule = walk.schedule();
        if found.runs == 0 {
            found.first_space = Some(space(&schedule));
            if reduce.is_none() && found.first_space.is_some_and(|n| n > u128::from(bound)) {
                return Ok((found, false));
            }
        }
        found.add(schedule, result);
        each(found.runs);
        if !walk.next() {
            return Ok((found, true));
        }
        if found.runs >= how.give_up_at {
            return Ok((found, false));
        }
    }
}

/// How many orders there would be if every worker took as many steps as
/// the busiest one in `schedule`: the multinomial of those counts, an
/// estimate made from the first run to choose the walk (the branches'
/// moves are left out: they only make the space larger).
fn space(schedule: &[Move]) -> u128 {
    let mut counts = BTreeMap::new();
    let steps = schedule.iter().filter_map(|m| match m {
        Move::Step(w) => Some(*w),
        _ => None,
    });
    for w in steps {
        *counts.entry(w).or_insert(0u128) += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    let mut total: u128 = 1;
    let mut placed: u128 = 0;
    for _ in counts.into_values() {
        let n = most;
        for k in 1..=n {
            placed += 1;
            total = total.saturating_mul(placed) / k;
        }
    }
    total
}

/// The steps of one request that touch nothing another request's steps
/// read or write, so that taking them at once, or later, leaves every
/// request the same answers and the tables the same: getting a connection
/// when the pool has one for every worker, opening a transaction (its
/// snapshot is taken by its first statement), and the work (the service
/// call and the request's own XP row), unless a heartbeat renews the
/// claim meanwhile or a guard file's statements read the XP rows. A reduced walk takes such a step as soon as it can,
/// never branching on it: every order of the other steps is still run,
/// and each stands for the orders that differ only in where those steps
/// fall (a partial-order reduction).
#[derive(Debug, Clone, Copy)]
pub struct Independence {
    checkout: bool,
    work: bool,
}

impl Independence {
    fn of(settings: &RaceSettings) -> Independence {
        let app = settings.app();
        // A guard file is someone else's SQL: if it names the XP table at
        // all, the work is not taken to be independent of its steps.
        let file_reads_work = app.guard_file.is_some_and(|f| {
            f.0.statements
                .iter()
                .any(|s| s.written.to_ascii_lowercase().contains("experience_points"))
        });
        Independence {
            checkout: app.pool.for_workers() >= settings.requests().workers(),
            work: app.recovery.heartbeat().is_none() && !file_reads_work,
        }
    }

    fn of_step(self, step: Step) -> bool {
        match step {
            Step::Checkout => self.checkout,
            Step::Begin => true,
            Step::Work => self.work,
            _ => false,
        }
    }
}

pub use crate::race::moves::joined;

/// The counts so far, and the shortest failing schedule.
#[derive(Default)]
struct Tally {
    /// The orders the first run's steps have, if no run takes others.
    first_space: Option<u128>,
    runs: u64,
    failing: u64,
    failing_on_steps: u64,
    kinds: BTreeMap<Failure, u64>,
    xp_rows: BTreeMap<u64, u64>,
    shortest: Option<(Vec<Move>, Vec<Failure>, Ran)>,
}

impl Tally {
    fn add(&mut self, schedule: Vec<Move>, result: Ran) {
        self.runs += 1;
        *self.xp_rows.entry(result.left().xp_rows).or_default() += 1;
        let failures = result.failures();
        if failures.is_empty() {
            return;
        }
        self.failing += 1;
        self.failing_on_steps += u64::from(schedule.iter().all(|m| m.is_step()));
        for f in &failures {
            *self.kinds.entry(*f).or_default() += 1;
        }
        let size = |s: &[Move]| (s.len(), switches(s));
        let shorter = match &self.shortest {
            Some((best, ..)) => size(&schedule) < size(best),
            None => true,
        };
        if shorter {
            self.shortest = Some((schedule, failures, result));
        }
    }
}

/// One interleaving: at each turn the walk picks a move: a free worker's
/// step (a worker waiting on a lock is not free until the lock is
/// released), or, on the walk's branches, a crash or the clock, each at
/// most once a run. A reduced walk takes an independent step as the only
/// step of its turn, with its worker's crash beside it.
async fn drive(controller: &mut Controller, walk: &mut Walk, how: How) -> Result<()> {
    controller.look_every(LOOK_EVERY);
    controller.pool_is_ample();
    controller.settle_all().await;
    let (mut at, mut crashed, mut jumped) = (0, false, false);
    while !controller.all_finished() {
        let free = free_workers(controller).await?;
        if free.is_empty() {
            break;
        }
        let alone = how.reduce.and_then(|r| {
            free.iter().copied().find(|w| {
                matches!(controller.standing.get(w), Some(Standing::Before(step)) if r.of_step(*step))
            })
        });
        let movers = alone.map_or(free, |w| vec![w]);
        let mut moves: Vec<Move> = movers.iter().map(|&w| Move::Step(w)).collect();
        if how.branches.clock
            && !jumped
            && alone.is_none()
            && controller
                .clock_would_age()
                .await
                .map_err(anyhow::Error::msg)?
        {
            moves.push(Move::Clock);
        }
        if how.branches.crashes && !crashed {
            moves.extend(
                movers
                    .iter()
                    .filter(|&&w| controller.can_crash(w))
                    .map(|&w| Move::Crash(w)),
            );
        }
        match walk.choose(at, &moves) {
            Choice::Make(m) => {
                crashed |= matches!(m, Move::Crash(_));
                jumped |= m == Move::Clock;
                if let Err(why) = controller.take(m).await {
                    bail!("{m} could not be made at turn {}: {why}", at + 1);
                }
            }
            Choice::Diverged => bail!(
                "replaying the same steps, turn {} found other moves possible than before: \
                 the database did not answer the same way twice, so the exploration stops",
                at + 1
            ),
        }
        at += 1;
    }
    Ok(())
}

/// The workers paused before a step, once every step in flight has ended
/// or is seen waiting; at a turn where every unfinished worker waits on a
/// lock, waits (up to [`STALL`]) for the server to end a wait.
async fn free_workers(controller: &mut Controller) -> Result<Vec<usize>> {
    let began = Instant::now();
    loop {
        controller.refresh().await;
        let free: Vec<usize> = controller
            .standing
            .iter()
            .filter(|(_, s)| matches!(s, Standing::Before(_)))
            .map(|(w, _)| *w)
            .collect();
        if !free.is_empty() || controller.all_finished() {
            return Ok(free);
        }
        if began.elapsed() > STALL {
            bail!(
                "every unfinished worker has waited on a lock for {} s",
                STALL.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_space_is_the_multinomial_of_the_step_counts() {
        use crate::race::moves::steps;
        assert_eq!(super::space(&steps(&[1, 1, 1, 1, 2, 2, 2, 2])), 70);
        let three: Vec<usize> = [1, 2, 3].iter().flat_map(|&w| [w; 4]).collect();
        assert_eq!(super::space(&steps(&three)), 34_650);
        // A loser that took fewer steps counts as the busiest worker.
        assert_eq!(super::space(&steps(&[1, 1, 1, 1, 2, 2, 3, 3, 3])), 34_650);
    }
}
