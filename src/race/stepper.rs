//! Step-by-step interleavings: every worker pauses before each step and waits for its turn.
//!
//! Like PostgreSQL's isolation tester, one step runs at a time, and the next
//! is chosen only when it finished or is seen blocked on another worker's
//! lock. The choice comes from a person at the terminal or from a schedule
//! (`--schedule 1,1,2,2,...`), so any interleaving can be replayed exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::db::book;

/// The server the workers' sessions live on, as the controller watches
/// them: who waits on whose lock, and how a session is killed.
#[derive(Debug, Clone)]
pub enum Watch {
    /// PostgreSQL: `pg_blocking_pids`, `pg_terminate_backend`.
    Postgres(PgPool),
    /// MariaDB: InnoDB's lock waits, the named lock `lock`'s holder for a
    /// session waiting in `GET_LOCK`, and `KILL CONNECTION`.
    Mariadb {
        admin: sqlx::MySqlPool,
        lock: String,
        /// On a Galera cluster, a connection to each node: after each
        /// step the controller waits until every node has applied every
        /// commit (see [`crate::db::mariadb::watch::all_applied`]).
        nodes: Vec<sqlx::MySqlPool>,
        /// On a cluster, the node (its place in `nodes`) each worker's
        /// session is on, in the workers' order: a crash is killed there.
        node_of: Vec<usize>,
    },
}

impl Watch {
    /// The server sessions `pid` waits for.
    async fn blockers_of(&self, pid: i32) -> Result<Vec<i32>, String> {
        match self {
            Watch::Postgres(meta) => {
                let blockers = async {
                    let mut tx = meta.begin().await?;
                    let blockers = book::query_scalar("SELECT unnest(pg_blocking_pids($1))")
                        .bind(pid)
                        .fetch_all(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(blockers)
                };
                blockers.await.map_err(|e| e.to_string())
            }
            Watch::Mariadb { admin, lock, .. } => {
                crate::db::mariadb::watch::blockers_of(admin, pid, lock)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// On a cluster, waits until every node has applied what the others
    /// committed, so that the next step reads the same rows on any node
    /// however fast each node's applier was; a node still behind after the
    /// limit is said.
    async fn all_applied(&self) -> Result<(), String> {
        match self {
            Watch::Mariadb { nodes, .. } if nodes.len() > 1 => {
                crate::db::mariadb::watch::all_applied(nodes).await
            }
            _ => Ok(()),
        }
    }

    /// Kills `worker`'s session `pid` (on its node, on a cluster), and
    /// waits until the server has let it go.
    async fn kill(&self, worker: usize, pid: i32) -> Result<(), String> {
        match self {
            Watch::Postgres(meta) => terminate(meta, pid).await.map_err(|e| e.to_string()),
            Watch::Mariadb {
                admin,
                nodes,
                node_of,
                ..
            } => {
                let on = worker
                    .checked_sub(1)
                    .and_then(|w| node_of.get(w))
                    .and_then(|n| nodes.get(*n))
                    .unwrap_or(admin);
                crate::db::mariadb::watch::kill(on, pid)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }
}
use tokio::sync::mpsc;

use super::clock::Clock;
use super::moves::Move;
use crate::request::fault::terminate;
use crate::request::{Go, Step, StepHook, TurnEvent};

/// Where a worker stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Paused before this step.
    Before(Step),
    /// Running a step; not paused yet.
    Running(Step),
    /// Waiting on a lock held by these workers (`<waiting ...>`).
    Blocked(Step, Vec<usize>),
    Finished,
}

/// The controller's end.
pub struct Controller {
    events: mpsc::UnboundedReceiver<TurnEvent>,
    go: BTreeMap<usize, mpsc::UnboundedSender<Go>>,
    pids: BTreeMap<usize, i32>,
    pub standing: BTreeMap<usize, Standing>,
    /// What each worker's last step found or did, as its trace noted it.
    found: BTreeMap<usize, String>,
    watch: Watch,
    free_running: bool,
    /// How long a step runs before the controller looks for a lock wait.
    settle: Duration,
    /// Whether a checkout can wait for the pool: not when it holds a
    /// connection for every worker.
    pool_can_run_out: bool,
    /// Moves pending claims past the stale-claim age (`clock`).
    clock: Option<Clock>,
    /// The workers killed on purpose (`crashN`).
    crashed: Vec<usize>,
    /// Why the last look for lock waits failed, if it did: said when a
    /// step then seems to run for ever.
    unseen: Option<String>,
    /// On a cluster: whether each step waits until every node applied the
    /// others' commits (not while a node is held behind on purpose).
    nodes_in_step: bool,
}

/// How long a step may run before the controller looks for a lock wait.
const SETTLE: Duration = Duration::from_millis(150);

impl Controller {
    /// A controller and one hook per worker.
    pub fn new(workers: usize, watch: Watch) -> (Self, Vec<StepHook>) {
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut go = BTreeMap::new();
        let mut hooks = Vec::new();
        for worker in 1..=workers {
            let (tx, rx) = mpsc::unbounded_channel();
            go.insert(worker, tx);
            hooks.push(StepHook::new(worker, events_tx.clone(), rx));
        }
        let standing = (1..=workers)
            .map(|w| (w, Standing::Running(Step::Checkout)))
            .collect();
        let controller = Self {
            events,
            go,
            pids: BTreeMap::new(),
            standing,
            found: BTreeMap::new(),
            watch,
            free_running: false,
            settle: SETTLE,
            pool_can_run_out: true,
            clock: None,
            crashed: Vec::new(),
            unseen: None,
            nodes_in_step: true,
        };
        (controller, hooks)
    }

    /// Looks for lock waits this often while a step runs: sooner costs a
    /// query to the server each time, never a different answer, as a step
    /// counts as waiting only when the server says it waits.
    pub fn look_every(&mut self, every: Duration) {
        self.settle = every;
    }

    /// The pool holds a connection for every worker: a checkout that has
    /// not ended is slow, never waiting for the pool. (Without this, a
    /// checkout still running after a look is taken to wait for the pool,
    /// which on a loaded machine is a guess.)
    pub fn pool_is_ample(&mut self) {
        self.pool_can_run_out = false;
    }

    /// On a cluster, lets each node apply the others' commits in its own
    /// time from now on: for a walk that holds a node behind on purpose.
    pub fn let_nodes_lag(&mut self) {
        self.nodes_in_step = false;
    }

    /// Gives the schedule its clock.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = Some(clock);
    }

    /// Waits until every worker is paused or finished.
    pub async fn settle_all(&mut self) {
        while self
            .standing
            .values()
            .any(|s| matches!(s, Standing::Running(_)))
        {
            match tokio::time::timeout(self.settle, self.events.recv()).await {
                Ok(Some(event)) => self.apply(event),
                Ok(None) => break,
                Err(_) => self.look_for_waits().await,
            }
        }
    }

    /// Lets `worker` take its next step and waits until that step ended or
    /// is seen blocked. Returns what happened, for the screen.
    pub async fn advance(&mut self, worker: usize) -> Result<String, String> {
        self.refresh().await;
        match self.standing.get(&worker).cloned() {
            None => return Err(format!("there is no worker {worker}")),
            Some(Standing::Finished) => {
                return Ok(format!("worker {worker} has finished; skipped"));
            }
            Some(Standing::Blocked(step, by)) => {
                return Err(format!(
                    "worker {worker} is blocked in its {} step, waiting for {}: it cannot move until they do",
                    step.name(),
                    names(&by)
                ));
            }
            Some(Standing::Running(step)) => {
                return Err(format!(
                    "worker {worker} is still running its {} step",
                    step.name()
                ));
            }
            Some(Standing::Before(step)) => {
                self.standing.insert(worker, Standing::Running(step));
                if let Some(go) = self.go.get(&worker) {
                    let _ = go.send(Go::Step);
                }
            }
        }
        self.wait_for(worker).await?;
        self.nodes_applied().await?;
        Ok(self.said(worker))
    }

    /// Waits until `worker`'s step, and any other it set moving, ended or
    /// is seen blocked.
    async fn wait_for(&mut self, worker: usize) -> Result<(), String> {
        let began = Instant::now();
        loop {
            // Another blocked worker may move on too, when this step frees its lock.
            let running = matches!(self.standing.get(&worker), Some(Standing::Running(_)));
            if !running
                && !self
                    .standing
                    .values()
                    .any(|s| matches!(s, Standing::Running(_)))
            {
                break;
            }
            match tokio::time::timeout(self.settle, self.events.recv()).await {
                Ok(Some(event)) => self.apply(event),
                Ok(None) => break,
                Err(_) => {
                    self.look_for_waits().await;
                    let still = self
                        .standing
                        .values()
                        .any(|s| matches!(s, Standing::Running(_)));
                    if still && began.elapsed() > Duration::from_secs(30) {
                        let why = match &self.unseen {
                            Some(why) => format!(
                                " (the server's lock waits could not be read: {})",
                                crate::controls::escaped(why)
                            ),
                            None => String::new(),
                        };
                        return Err(format!(
                            "a step has run for 30 s without finishing or blocking{why}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// What `worker`'s last move came to, for the screen.
    fn said(&self, worker: usize) -> String {
        match self.standing.get(&worker) {
            Some(Standing::Blocked(step, by)) => {
                format!(
                    "worker {worker}: {} <waiting for {}>",
                    step.name(),
                    names(by)
                )
            }
            Some(Standing::Finished) => format!("worker {worker} finished"),
            Some(Standing::Before(next)) => match self.found.get(&worker) {
                Some(found) => format!("worker {worker}: {found}; next: {}", next.name()),
                None => format!("worker {worker} done; next: {}", next.name()),
            },
            _ => format!("worker {worker} moved"),
        }
    }

    /// Follows a schedule, one move per entry, handing each move's line to
    /// `each`; fails naming the first move that cannot be made.
    pub async fn follow(
        &mut self,
        schedule: &[Move],
        mut each: impl FnMut(usize, &str) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.settle_all().await;
        for (turn, &m) in schedule.iter().enumerate() {
            match self.take(m).await {
                Ok(line) => each(turn + 1, &line)?,
                Err(why) => anyhow::bail!(
                    "the schedule cannot proceed at step {} ({m}): {why}",
                    turn + 1
                ),
            }
        }
        Ok(())
    }

    /// Makes one move of a schedule.
    pub async fn take(&mut self, m: Move) -> Result<String, String> {
        match m {
            Move::Step(worker) => self.advance(worker).await,
            Move::Clock => self.jump().await,
            Move::Crash(worker) => self.crash(worker).await,
        }
    }

    /// The workers that still run: not finished, not crashed.
    fn running(&self) -> Vec<usize> {
        self.standing
            .iter()
            .filter(|(w, s)| **s != Standing::Finished && !self.crashed.contains(w))
            .map(|(w, _)| *w)
            .collect()
    }

    /// Whether the clock would age a claim now.
    pub async fn clock_would_age(&self) -> Result<bool, String> {
        let Some(clock) = &self.clock else {
            return Ok(false);
        };
        match clock.would_age(&self.running()).await {
            Ok(n) => Ok(n > 0),
            Err(e) => Err(format!("could not read the claims' ages: {e}")),
        }
    }

    /// Moves the pending claims past the stale-claim age.
    pub async fn jump(&mut self) -> Result<String, String> {
        self.refresh().await;
        let Some(clock) = &self.clock else {
            return Err("this race has no clock to move".into());
        };
        let told = match clock.jump(&self.running()).await {
            Ok(n) => clock.told(n),
            Err(e) => return Err(format!("the clock could not move: {e}")),
        };
        self.nodes_applied().await?;
        Ok(told)
    }

    /// On a cluster walked in step, waits until every node has applied
    /// what the last move committed (a step's, a crash's rollback, the
    /// clock's ageing on node 1), so that the next step meets it on any node.
    async fn nodes_applied(&self) -> Result<(), String> {
        match self.nodes_in_step {
            true => self.watch.all_applied().await,
            false => Ok(()),
        }
    }

    /// Whether `worker` can be crashed now: paused before a step other
    /// than its checkout, with a server process to kill.
    pub fn can_crash(&self, worker: usize) -> bool {
        matches!(self.standing.get(&worker), Some(Standing::Before(step)) if *step != Step::Checkout)
            && self.pids.contains_key(&worker)
    }

    /// Kills `worker`'s server process before its next step, as its app
    /// server's crash would, and lets the dead worker run out.
    pub async fn crash(&mut self, worker: usize) -> Result<String, String> {
        self.refresh().await;
        if !self.can_crash(worker) {
            return Err(format!(
                "worker {worker} can crash only while paused before a step after its checkout"
            ));
        }
        let (Some(Standing::Before(step)), Some(&pid)) =
            (self.standing.get(&worker).cloned(), self.pids.get(&worker))
        else {
            return Err(format!("worker {worker} is not paused"));
        };
        if let Err(e) = self.watch.kill(worker, pid).await {
            return Err(format!(
                "could not kill worker {worker}'s server process: {e}"
            ));
        }
        self.crashed.push(worker);
        self.standing.insert(worker, Standing::Running(step));
        if let Some(go) = self.go.get(&worker) {
            let _ = go.send(Go::Crashed);
        }
        self.wait_for(worker).await?;
        self.nodes_applied().await?;
        Ok(format!(
            "worker {worker} crashed before its {} step; its server process is gone",
            step.name()
        ))
    }

    /// Lets every worker run to the end without pausing.
    pub async fn run_free(&mut self) {
        self.free_running = true;
        for (worker, standing) in self.standing.iter_mut() {
            if let Standing::Before(step) = standing {
                *standing = Standing::Running(*step);
                if let Some(go) = self.go.get(worker) {
                    let _ = go.send(Go::Step);
                }
            }
        }
        while !self.standing.values().all(|s| *s == Standing::Finished) {
            match self.events.recv().await {
                Some(event) => self.apply(event),
                None => break,
            }
        }
    }

    /// Takes in what the workers said meanwhile, and forgets lock waits that ended.
    pub async fn refresh(&mut self) {
        for standing in self.standing.values_mut() {
            if let Standing::Blocked(step, by) = standing
                && !by.is_empty()
            {
                *standing = Standing::Running(*step);
            }
        }
        while let Ok(event) = self.events.try_recv() {
            self.apply(event);
        }
        if self
            .standing
            .values()
            .any(|s| matches!(s, Standing::Running(_)))
        {
            self.settle_all().await;
        }
    }

    pub fn all_finished(&self) -> bool {
        self.standing.values().all(|s| *s == Standing::Finished)
    }

    fn apply(&mut self, event: TurnEvent) {
        match event {
            TurnEvent::Paused {
                worker,
                step,
                found,
            } => {
                match found {
                    Some(found) => self.found.insert(worker, found),
                    None => self.found.remove(&worker),
                };
                if self.free_running {
                    self.standing.insert(worker, Standing::Running(step));
                    if let Some(go) = self.go.get(&worker) {
                        let _ = go.send(Go::Step);
                    }
                } else {
                    self.standing.insert(worker, Standing::Before(step));
                }
            }
            TurnEvent::Pid { worker, pid } => {
                self.pids.insert(worker, pid);
            }
            TurnEvent::Finished { worker } => {
                self.standing.insert(worker, Standing::Finished);
            }
        }
    }

    /// Marks running workers that wait on another's lock, as pg_blocking_pids sees it.
    async fn look_for_waits(&mut self) {
        let running: Vec<(usize, Step, i32)> = self
            .standing
            .iter()
            .filter_map(|(w, s)| match s {
                Standing::Running(step) | Standing::Blocked(step, _) => {
                    Some((*w, *step, *self.pids.get(w)?))
                }
                _ => None,
            })
            .collect();
        // No connection yet and still in its checkout: waiting for the pool.
        let pool_waits: Vec<usize> = self
            .standing
            .iter()
            .filter(|(w, s)| {
                self.pool_can_run_out
                    && **s == Standing::Running(Step::Checkout)
                    && !self.pids.contains_key(w)
            })
            .map(|(w, _)| *w)
            .collect();
        for worker in pool_waits {
            self.standing
                .insert(worker, Standing::Blocked(Step::Checkout, Vec::new()));
        }
        for (worker, step, pid) in running {
            let blockers = match self.watch.blockers_of(pid).await {
                Ok(blockers) => blockers,
                Err(why) => {
                    self.unseen = Some(why);
                    Vec::new()
                }
            };
            let by: Vec<usize> = self
                .pids
                .iter()
                .filter(|(w, p)| blockers.contains(p) && **w != worker)
                .map(|(w, _)| *w)
                .collect();
            if !by.is_empty() {
                self.standing.insert(worker, Standing::Blocked(step, by));
            }
        }
    }
}

fn names(workers: &[usize]) -> String {
    if workers.is_empty() {
        return "a free connection".into();
    }
    workers
        .iter()
        .map(|w| format!("worker {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}
