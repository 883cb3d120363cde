//! What a race on MariaDB is: the race's settings as MariaDB takes them, refused in one line where it cannot run them yet, and the shape each request runs.

use anyhow::{Result, bail};
use serde::Serialize;

use super::cluster;
use super::taken;
use crate::limits::Origin;
use crate::race::RaceSettings;
use crate::race::engine::Engine;
use crate::race::options::{CrashPlan, RaceInput};
use crate::request::fault::FaultPoint;
use crate::request::mariadb::{Answered, Ctx, ReadBack};
use crate::store::StoreKind;
use crate::strategy::StrategyKind;
use crate::strategy::guard_file::{self, Dialect, GuardRef};
use crate::strategy::spec::OnMariadb;
use crate::strategy::transaction::{Isolation, Transaction};

/// What a MariaDB race needs of the race's settings.
#[derive(Debug, Clone, Serialize)]
pub struct MariadbRace {
    pub strategy: StrategyKind,
    pub workers: usize,
    pub pool_size: usize,
    pub runner_holds_connection: bool,
    pub work_ms: u64,
    /// The request's transaction, at its level; `null`: each statement
    /// commits on its own.
    pub isolation: Option<Isolation>,
    /// `--crash`: where a worker dies, its session killed.
    pub crash: Option<CrashPlan>,
    /// The guard's stale-claim age, in ms.
    pub stale_after_ms: u64,
    /// `--fail-work`: the worker whose work fails, if one does.
    pub fail_work: Option<usize>,
    /// With `fail_work`: what the guard leaves then (`--on-failure`).
    pub on_failure: Option<crate::strategy::guard::OnFailure>,
    /// `--heartbeat-ms`: how often the guard's owner renews its claim while
    /// it works; `null`: it does not.
    pub heartbeat_ms: Option<u64>,
    /// `--hang-up`: the client that gives up halfway through its request's
    /// work, then retries; `null`: none does.
    pub hang_up: Option<CrashPlan>,
    /// With `hang_up`: what the app does with the request then
    /// (`--on-hangup`).
    pub on_hangup: Option<crate::http::app::OnHangup>,
    /// `--read-back`: the claim as find-or-create, and how a loser reads
    /// the key back after 1062; `null`: the course's `INSERT IGNORE`.
    pub read_back: Option<ReadBack>,
    /// `--store`: where claim-work-complete keeps its claims.
    pub store: StoreKind,
    /// With `--store cache`, the level of the cache's own transaction
    /// (its `write(unless_exist: true)`): `--isolation`, else InnoDB's.
    pub cache_isolation: Option<Isolation>,
    #[serde(skip)]
    pub(super) recovery_retries: usize,
    #[serde(skip)]
    pub(super) settings: RaceSettings,
    /// `--strategy-file`: the guard file raced in the strategy's place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy_file: Option<String>,
    #[serde(skip)]
    pub(super) shape: Shaped,
    /// `--nodes` and `--spread`: the cluster, and how requests reach it.
    #[serde(flatten)]
    pub cluster: cluster::Cluster,
}

/// What each request runs: a built-in strategy's MariaDB shape, or a guard
/// file written for MariaDB.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shaped {
    Builtin(crate::request::mariadb::Shape),
    File(GuardRef),
}

impl Shaped {
    pub(super) async fn answer(self, ctx: &mut Ctx) -> Answered {
        match self {
            Shaped::Builtin(shape) => shape(ctx).await,
            Shaped::File(file) => guard_file::on_mariadb::answer(file, ctx).await,
        }
    }

    /// What the request answers once the cluster refused its transaction's
    /// COMMIT (1213) and it was rolled back, if the shape says (a guard
    /// file's `refused_commit`); otherwise the request's 500 stands.
    pub(super) async fn after_refused_commit(self, ctx: &mut Ctx) -> Option<Answered> {
        match self {
            Shaped::Builtin(_) => None,
            Shaped::File(file) => guard_file::on_mariadb::after_refused_commit(file, ctx).await,
        }
    }
}

impl MariadbRace {
    /// The race `settings` describe, on MariaDB; refused in one line when
    /// the strategy has no MariaDB shape. `isolation` is what the user
    /// asked for; unasked, a transaction gets InnoDB's REPEATABLE READ.
    fn new(settings: RaceSettings, input: &RaceInput) -> Result<Self> {
        let (isolation, read_back) = (input.transaction.isolation, input.transaction.read_back);
        let strategy = settings.strategy();
        if read_back.is_some() && strategy != StrategyKind::ClaimWorkComplete {
            bail!(
                "--read-back shapes claim-work-complete's claim as find-or-create; {} has no \
                 such claim",
                strategy.spec().name
            );
        }
        let store = settings.store.kind();
        let file = settings.app().guard_file;
        check_renewal(&settings, &cluster::Cluster::of(input)?)?;
        let shape = match (file, store, strategy.spec().on_mariadb) {
            (Some(file), _, _) if file.engine != Dialect::Mariadb => bail!(
                "{} is written for {}; a file for MariaDB says engine = \"mariadb\" and \
                 MySQL's SQL",
                file.name,
                file.engine.server()
            ),
            (Some(file), _, _) => Shaped::File(file),
            (None, StoreKind::Cache, _) => {
                Shaped::Builtin(crate::strategy::cache_on_mariadb::shape)
            }
            (None, StoreKind::Table, OnMariadb::Runs(shape)) => Shaped::Builtin(shape),
            (None, StoreKind::Table, OnMariadb::Refused(why)) => {
                bail!("{} on MariaDB: {why}", strategy.spec().name)
            }
            (None, StoreKind::Redis, _) => {
                bail!(
                    "--store redis keeps claims beside PostgreSQL's races so far; drop --engine mariadb"
                )
            }
        };
        let isolation = isolation.or(file.and_then(|f| f.isolation));
        let cache_isolation = (store == StoreKind::Cache)
            .then(|| isolation.unwrap_or(Engine::Mariadb.spec().default_isolation));
        let app = settings.app();
        let isolation = match app.transaction.scope() {
            Transaction::None => None,
            Transaction::Request => {
                Some(isolation.unwrap_or(Engine::Mariadb.spec().default_isolation))
            }
        };
        Ok(Self {
            strategy,
            workers: settings.requests().workers(),
            pool_size: app.pool.size(),
            runner_holds_connection: app.pool.runner_holds_connection(),
            work_ms: settings.work_ms(),
            isolation,
            crash: settings.faults().crash(),
            stale_after_ms: app.recovery.stale_after().as_millis() as u64,
            fail_work: settings.faults().fail_work(),
            on_failure: settings
                .faults()
                .fail_work()
                .map(|_| app.recovery.on_failure()),
            heartbeat_ms: app.recovery.heartbeat().map(|d| d.as_millis() as u64),
            hang_up: input.faults.hang_up,
            on_hangup: input
                .faults
                .hang_up
                .map(|_| input.hang_up.on_hangup.unwrap_or_default()),
            read_back,
            store,
            cache_isolation,
            strategy_file: file.map(|f| f.name.clone()),
            recovery_retries: settings.faults().recovery_retries(),
            shape,
            cluster: cluster::Cluster::of(input)?.with_requests(settings.requests().workers()),
            settings,
        })
    }

    /// The race `input` asks for, on MariaDB: any option a MariaDB race
    /// does not take yet is refused, naming it, rather than ignored.
    pub fn from_input(input: &RaceInput, origin: Origin) -> Result<Self> {
        taken::refuse_untaken(input)?;
        let settings = for_settings(input).build(origin)?;
        let race = Self::new(settings, input)?;
        match race.hang_up {
            Some(plan) => check_hang_up(plan, &race)?,
            None if input.hang_up.on_hangup.is_some() => bail!(
                "--on-hangup says what the app does with a request whose client gave up: add \
                 --hang-up"
            ),
            None => {}
        }
        Ok(race)
    }

    /// The stepped race `input` asks for, on MariaDB (`idem step`, `idem
    /// explore`): 2 to 5 workers, no fault; its schedule is the driver's.
    pub fn stepped_from_input(input: &RaceInput) -> Result<Self> {
        if input.faults.hang_up.is_some() || input.hang_up.on_hangup.is_some() {
            bail!("a stepped race's steps are the driver's: drop --hang-up and --on-hangup");
        }
        let unscheduled = input.clone().with(|r| r.shape.schedule = None);
        taken::refuse_untaken(&unscheduled)?;
        let settings = for_settings(input).build_stepped()?;
        cluster::Cluster::of(&unscheduled)?.stepped(settings.requests().workers())?;
        Self::new(settings, input)
    }

    /// The race's settings, as PostgreSQL's race would take them.
    pub fn settings(&self) -> &RaceSettings {
        &self.settings
    }

    /// The XP rows the course predicts, as on PostgreSQL.
    pub fn lesson_figure(&self) -> u64 {
        self.settings.lesson_figure()
    }
}

/// `input` as PostgreSQL's settings take it: without `--read-back`, which
/// they refuse, and with `--store cache` without `--isolation`, which
/// here names the level of the cache's own transaction, not a request
/// transaction's.
fn for_settings(input: &RaceInput) -> RaceInput {
    let cache = input.store.store == Some(StoreKind::Cache);
    input.clone().with(|r| {
        r.transaction.read_back = None;
        r.cluster = Default::default();
        // A client that gives up is in this process here, not over HTTP:
        // the race checks it itself (see `hang_up::check`).
        r.faults.hang_up = None;
        r.hang_up = Default::default();
        if cache {
            r.transaction.isolation = None;
        }
    })
}

/// `--heartbeat-ms`, refused where a MariaDB race cannot renew yet: a
/// cluster (the beats go to one node). A guard file without a renew step
/// is refused where every race's settings are checked.
fn check_renewal(settings: &RaceSettings, cluster: &cluster::Cluster) -> Result<()> {
    if settings.app().recovery.heartbeat().is_none() {
        return Ok(());
    }
    if cluster.is_cluster() {
        bail!("a race on a Galera cluster (--nodes) does not take --heartbeat-ms yet");
    }
    Ok(())
}

/// `--hang-up` on MariaDB: during the work only, one of the workers, and
/// not beside lesson 7's faults or on a cluster (one fault a race).
fn check_hang_up(plan: CrashPlan, race: &MariadbRace) -> Result<()> {
    if plan.at != FaultPoint::DuringWork {
        bail!(
            "--hang-up at={}: a client hangs up during-work only (it sees no other step)",
            plan.at.name()
        );
    }
    if let Some(worker) = plan.worker
        && !(1..=race.workers).contains(&worker)
    {
        bail!(
            "--hang-up worker={worker} is not one of the {} workers",
            race.workers
        );
    }
    if race.crash.is_some() || race.fail_work.is_some() {
        bail!("--hang-up is lesson 9's fault: drop --crash and --fail-work");
    }
    if race.cluster.is_cluster() {
        bail!("a race on a Galera cluster (--nodes) does not take --hang-up yet");
    }
    Ok(())
}
