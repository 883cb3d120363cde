//! One request on MariaDB: its connection from the pool, the steps it takes (timed and noted as on PostgreSQL), the service call its work makes, and how it was answered.
//!
//! A strategy's MariaDB shape (its file's `on_mariadb`) sends its
//! statements through [`Ctx`], never through the connection itself, so
//! that every statement is a step in the workers' table and every server
//! error is kept with its number and SQLSTATE.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::mysql::{MySql, MySqlDatabaseError, MySqlQueryResult, MySqlRow};
use sqlx::pool::PoolConnection;

use crate::request::fault::FaultPoint;
use crate::request::hang_up::HangUps;
use crate::request::{ClaimPart, Go, Outcome, Step, StepEvent, StepHook};

/// A strategy's shape on MariaDB: the request in, its answer out.
pub type Shape = for<'a> fn(&'a mut Ctx) -> Pin<Box<dyn Future<Output = Answered> + Send + 'a>>;

/// What a request asks for.
#[derive(Debug, Clone, Serialize)]
pub struct Asked {
    pub key: String,
    pub worker: usize,
    pub user_id: i64,
    pub amount: i32,
    pub lesson: i32,
    /// What the request asks for, hashed (lesson 4); `None` when the app
    /// checks no fingerprints.
    pub fingerprint: Option<String>,
    /// Whether its work fails (`--fail-work`): the service call is made
    /// and answers an error.
    pub work_fails: bool,
}

/// The least time one beat may wait for its renewal.
const BEAT_LIMIT: Duration = Duration::from_secs(1);

/// An owner's heartbeat: its task is aborted when this is dropped, with
/// the request's future or at the end of its work.
pub type Heartbeat = crate::tasks::AbortOnDrop;

/// A value bound to a statement's `?`.
#[derive(Debug, Clone)]
pub enum Bind<'a> {
    Text(&'a str),
    /// Text or NULL.
    OptText(Option<&'a str>),
    Int(i64),
    /// An integer or NULL.
    OptInt(Option<i64>),
    Bytes(&'a [u8]),
}

/// The error a MariaDB server answered with: its own number beside the
/// SQLSTATE (1213 and 40001, 1062 and 23000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerError {
    pub number: u16,
    pub sqlstate: String,
    /// MariaDB's name for the number, where idem knows it.
    pub name: &'static str,
}

/// The server errors a race meets, by number.
const NAMES: [(u16, &str); 6] = [
    (1062, "ER_DUP_ENTRY"),
    (1205, "ER_LOCK_WAIT_TIMEOUT"),
    (1213, "ER_LOCK_DEADLOCK"),
    (1020, "ER_CHECKREAD"),
    (1142, "ER_TABLEACCESS_DENIED_ERROR"),
    (1969, "ER_STATEMENT_TIMEOUT"),
];

impl ServerError {
    fn of(err: &sqlx::Error) -> Option<Self> {
        let db = err.as_database_error()?;
        let my = db.try_downcast_ref::<MySqlDatabaseError>()?;
        let number = my.number();
        Some(ServerError {
            number,
            sqlstate: my.code().unwrap_or("HY000").to_string(),
            name: NAMES
                .iter()
                .find(|(n, _)| *n == number)
                .map_or("", |(_, name)| name),
        })
    }

    /// What the error did to the step's request, in a step's note: a
    /// deadlock says whose transaction the server chose to roll back. On a
    /// Galera cluster the same 1213, with the same message, is also a
    /// COMMIT refused by certification or a transaction aborted for a
    /// replicated write: the note says both.
    pub fn told(&self, on_cluster: bool) -> String {
        match self.number {
            1213 if on_cluster => format!(
                "rolled back: refused by the cluster (another node's write certified \
                 first), or a deadlock on its node, error {}",
                self.shown()
            ),
            1213 => format!(
                "deadlock: InnoDB chose this transaction to roll back, error {}",
                self.shown()
            ),
            1205 => format!("gave up waiting for a lock, error {}", self.shown()),
            1969 => format!(
                "stopped by the server past the step's time limit, error {}",
                self.shown()
            ),
            _ => format!("error {}", self.shown()),
        }
    }

    /// `1213 (40001, ER_LOCK_DEADLOCK)`.
    pub fn shown(&self) -> String {
        match self.name {
            "" => format!("{} ({})", self.number, self.sqlstate),
            name => format!("{} ({}, {name})", self.number, self.sqlstate),
        }
    }
}

/// The server's error number of `err`, if the server answered with one.
pub fn number(err: &sqlx::Error) -> Option<u16> {
    ServerError::of(err).map(|e| e.number)
}

/// How a request ended.
#[derive(Debug, Clone)]
pub struct Answered {
    pub outcome: Outcome,
    /// What it found: "no key", "claim pending".
    pub saw: String,
    /// What it did: "made XP #3, key store lost".
    pub did: String,
    /// The XP row it made, if it made one that was kept or not.
    pub made_xp: Option<i64>,
}

impl Answered {
    pub fn new(outcome: Outcome, saw: impl Into<String>, did: impl Into<String>) -> Self {
        Self {
            outcome,
            saw: saw.into(),
            did: did.into(),
            made_xp: None,
        }
    }
}

/// A crash on purpose (`--crash`): the first worker (or worker N) to reach
/// the point has its session killed by another (`KILL CONNECTION`), and
/// dies with it: it answers nothing and calls nothing more.
#[derive(Debug)]
pub struct Crash {
    /// Where the worker dies.
    at: FaultPoint,
    /// The worker that dies; `None`: whichever reaches the point first.
    worker: Option<usize>,
    fired: AtomicBool,
    /// The connection that sends the KILL: the run's bookkeeping.
    killer: sqlx::MySqlPool,
}

impl Crash {
    pub fn new(at: FaultPoint, worker: Option<usize>, killer: sqlx::MySqlPool) -> Arc<Self> {
        Arc::new(Self {
            at,
            worker,
            fired: AtomicBool::new(false),
            killer,
        })
    }

    /// Whether worker `worker` at `point` is the one to crash (once).
    fn due(&self, worker: usize, point: FaultPoint) -> bool {
        self.at == point
            && self.worker.is_none_or(|w| w == worker)
            && !self.fired.swap(true, Ordering::SeqCst)
    }
}

/// One request's connection and record.
pub struct Ctx {
    conn: PoolConnection<MySql>,
    pub asked: Asked,
    gate: Instant,
    work: Duration,
    calls: Arc<AtomicU64>,
    /// The isolation level of the request's transaction, if it runs in one.
    pub transaction: Option<Level>,
    /// `--read-back`: the claim as find-or-create, and how it reads back.
    pub read_back: Option<ReadBack>,
    /// The level of a transaction the shape opens itself, as Solid Cache's
    /// `write(unless_exist: true)` does.
    pub own_level: Level,
    pub(crate) steps: Vec<StepEvent>,
    pub(crate) error: Option<ServerError>,
    /// An error the request caught and went on past ([`Ctx::caught`]).
    rescued: Option<ServerError>,
    pub(crate) service_calls: u32,
    /// What the session holds until the request ends (a `GET_LOCK`), with
    /// the statement that lets it go.
    held: Option<(&'static str, [String; 2])>,
    /// The guard's stale-claim age: a pending claim older than this may be
    /// taken over.
    pub stale_after: Duration,
    /// When the work fails (`--fail-work`), whether the guard deletes its
    /// claim for a retry (`--on-failure release`) rather than store the 500.
    pub release_failed: bool,
    /// `--heartbeat-ms`: how often the owner renews its claim while it
    /// works, and the beats' own pool.
    pub heartbeat: Option<(Duration, sqlx::MySqlPool)>,
    /// The crash planned for the race, and this session's id to kill.
    crash: Option<(Arc<Crash>, u64)>,
    /// Whether this request has crashed (its session killed).
    pub(crate) crashed: bool,
    /// Step by step (`idem step`, `idem explore`): the hook it pauses on
    /// before each step.
    stepper: Option<StepHook>,
    /// Lesson 9's client that gives up: told when this request's work
    /// begins, if it may be the one (see [`HangUps`]).
    pub hang_up: Option<Arc<HangUps>>,
    /// Whether the session is on a node of a Galera cluster, where a 1213
    /// may be the cluster's refusal, not a deadlock.
    pub on_cluster: bool,
}

impl Ctx {
    pub(crate) fn new(
        conn: PoolConnection<MySql>,
        asked: Asked,
        gate: Instant,
        work: Duration,
        calls: Arc<AtomicU64>,
        transaction: Option<Level>,
        own_level: Level,
    ) -> Self {
        Self {
            conn,
            asked,
            gate,
            work,
            calls,
            transaction,
            read_back: None,
            own_level,
            steps: Vec::new(),
            error: None,
            rescued: None,
            service_calls: 0,
            held: None,
            stale_after: Duration::ZERO,
            release_failed: false,
            heartbeat: None,
            crash: None,
            crashed: false,
            stepper: None,
            hang_up: None,
            on_cluster: false,
        }
    }

    /// This session's id on the server (`CONNECTION_ID()`): what a KILL
    /// names and what the lock-wait views call it.
    async fn session_id(&mut self) -> Result<u64, sqlx::Error> {
        sqlx::query_scalar("SELECT CONNECTION_ID()")
            .fetch_one(&mut *self.conn)
            .await
    }

    /// Runs this request step by step on `hook`: the controller is told
    /// its session's id, to see its lock waits.
    pub(crate) async fn stepped(&mut self, hook: StepHook) -> Result<(), sqlx::Error> {
        let id = self.session_id().await?;
        hook.pid(i32::try_from(id).unwrap_or(i32::MAX));
        self.stepper = Some(hook);
        Ok(())
    }

    /// Step by step, waits for this worker's turn before `step`, telling
    /// the controller what the last step found. A worker the controller
    /// crashed meanwhile (its session killed) takes no more steps.
    async fn turn(&mut self, step: Step) -> Result<(), sqlx::Error> {
        if self.crashed {
            return Err(crashed());
        }
        // Before its first statement, its last step was the checkout.
        let found = match self.steps.last() {
            Some(e) => Some(e.note.clone()).filter(|n| !n.is_empty()),
            None => Some("got a connection".to_string()),
        };
        let Some(hook) = self.stepper.as_mut() else {
            return Ok(());
        };
        if hook.pause(step, found).await == Go::Crashed {
            let at = self.now_ms();
            self.conn.close_on_drop();
            self.crashed = true;
            self.steps.push(StepEvent {
                step: Step::Fault,
                start_ms: at,
                end_ms: at,
                note: format!("crashed before its {}", step.name()),
                sql: None,
            });
            return Err(crashed());
        }
        Ok(())
    }

    /// Arms the race's crash for this request: its session's id, read now,
    /// is what the KILL names.
    pub(crate) async fn arm(&mut self, crash: Arc<Crash>) -> Result<(), sqlx::Error> {
        let id = self.session_id().await?;
        self.crash = Some((crash, id));
        Ok(())
    }

    /// Crashes here if this is the planned point: another session kills
    /// this one. True if it crashed; `when` says where, for the table
    /// ("before it stored the key").
    async fn strike(&mut self, point: FaultPoint, when: &str) -> bool {
        let Some((crash, id)) = &self.crash else {
            return false;
        };
        if self.crashed || !crash.due(self.asked.worker, point) {
            return self.crashed;
        }
        let start_ms = self.now_ms();
        let _ = sqlx::query(&format!("KILL CONNECTION {id}"))
            .execute(&crash.killer)
            .await;
        // A dead session is never handed to the pool again.
        self.conn.close_on_drop();
        self.crashed = true;
        self.steps.push(StepEvent {
            step: Step::Fault,
            start_ms,
            end_ms: self.now_ms(),
            note: format!("crashed {when}"),
            sql: None,
        });
        true
    }

    fn now_ms(&self) -> f64 {
        self.gate.elapsed().as_secs_f64() * 1000.0
    }

    /// Sends `sql` with `binds` as `step`.
    pub async fn exec(
        &mut self,
        step: Step,
        sql: &'static str,
        binds: &[Bind<'_>],
    ) -> Result<MySqlQueryResult, sqlx::Error> {
        self.turn(step).await?;
        self.send(step, sql, binds).await
    }

    /// Sends `sql` as (part of) `step`, whose turn has come.
    async fn send(
        &mut self,
        step: Step,
        sql: &'static str,
        binds: &[Bind<'_>],
    ) -> Result<MySqlQueryResult, sqlx::Error> {
        let when = match step {
            Step::Store => "before it stored the key",
            _ => "before it completed its claim",
        };
        if matches!(step, Step::Store | Step::Complete)
            && self.strike(FaultPoint::BeforeComplete, when).await
        {
            return Err(crashed());
        }
        let query = bound(sql, binds);
        let start_ms = self.now_ms();
        let out = query.execute(&mut *self.conn).await;
        self.record(step, sql, start_ms, out.as_ref().err());
        out
    }

    /// Sends `sql` with `binds` as `step`: its first row, if there is one.
    ///
    /// The result is read to its end, its other rows let go as they come:
    /// a statement's outcome is its last packet, not its first row. On a
    /// Galera cluster an autocommit `INSERT ... RETURNING` sends its row
    /// before its COMMIT is certified, and a refused COMMIT (1213) comes
    /// after the row: a client that stops at the row believes it won, and
    /// meets the error at its next statement, after the work.
    pub async fn fetch_opt(
        &mut self,
        step: Step,
        sql: &'static str,
        binds: &[Bind<'_>],
    ) -> Result<Option<MySqlRow>, sqlx::Error> {
        use futures_util::TryStreamExt;
        self.turn(step).await?;
        let query = bound(sql, binds);
        let start_ms = self.now_ms();
        let mut rows = query.fetch(&mut *self.conn);
        let mut first = None;
        let out = loop {
            match rows.try_next().await {
                Ok(Some(row)) => {
                    first.get_or_insert(row);
                }
                Ok(None) => break Ok(first),
                Err(err) => break Err(err),
            }
        };
        drop(rows);
        self.record(step, sql, start_ms, out.as_ref().err());
        out
    }

    fn record(&mut self, step: Step, sql: &'static str, start_ms: f64, err: Option<&sqlx::Error>) {
        let error = err.and_then(ServerError::of);
        let note = error
            .as_ref()
            .map(|e| e.told(self.on_cluster))
            .unwrap_or_default();
        if let Some(error) = error {
            self.error = Some(error);
        }
        self.steps.push(StepEvent {
            step,
            start_ms,
            end_ms: self.now_ms(),
            note,
            sql: (!sql.is_empty()).then_some(sql),
        });
    }

    /// The request caught the server's last error and goes on, as an app
    /// that rescues it does (Rails' `rescue ActiveRecord::RecordNotUnique`
    /// after `ROLLBACK TO SAVEPOINT`): its transaction is not rolled back
    /// for it.
    pub fn caught(&mut self) {
        self.rescued = self.error.take();
    }

    /// The server error the request met: the one that ended it, or else
    /// the one it caught and went on past.
    pub(crate) fn met(&mut self) -> Option<ServerError> {
        self.error.take().or_else(|| self.rescued.take())
    }

    /// Notes what the last step found or did.
    pub fn note(&mut self, note: impl Into<String>) {
        // A fault's own note stays as the fault wrote it.
        if let Some(last) = self.steps.iter_mut().rev().find(|e| e.step != Step::Fault) {
            last.note = note.into();
        }
    }

    /// Keeps what the session took (a `GET_LOCK`) until the request ends,
    /// after its transaction, when `release` with `on` lets it go. Until
    /// then a request dropped at an await closes its connection, so that
    /// the pool never hands out a session holding someone's lock.
    pub fn hold_until_end(&mut self, release: &'static str, on: [String; 2]) {
        self.conn.close_on_drop();
        self.held = Some((release, on));
    }

    /// Closes the connection when the request ends, rather than return it
    /// to the pool: for what a session may have taken that nothing here
    /// lets go of (a guard file's `GET_LOCK`).
    pub fn close_when_done(&mut self) {
        self.conn.close_on_drop();
    }

    /// Lets go of what the session held, once the request's transaction
    /// has ended.
    pub(crate) async fn release_held(&mut self) {
        if let Some((release, [a, b])) = self.held.take()
            && self
                .fetch_opt(Step::Lock, release, &[Bind::Text(&a), Bind::Text(&b)])
                .await
                .is_ok()
        {
            self.note("key released");
        }
    }

    /// Opens the request's transaction at its level. From here until it
    /// ends, a request dropped at an await must not hand the pool a
    /// connection inside a transaction: the connection is closed on drop
    /// instead (the server rolls back a closed session's transaction).
    pub async fn begin(&mut self, level: Level) -> Result<(), sqlx::Error> {
        self.conn.close_on_drop();
        self.turn(Step::Begin).await?;
        self.send(Step::Begin, level.set, &[]).await?;
        self.note(format!("next transaction: {}", level.name));
        self.send(Step::Begin, "BEGIN", &[]).await?;
        self.note("BEGIN");
        Ok(())
    }

    pub async fn commit(&mut self) -> Result<(), sqlx::Error> {
        self.exec(Step::Commit, "COMMIT", &[]).await.map(drop)
    }

    /// Rolls the transaction back; a connection the server has already
    /// dropped is closed on drop anyway.
    pub async fn rollback(&mut self) {
        let _ = self.exec(Step::Rollback, "ROLLBACK", &[]).await;
    }

    /// The work: the service call (counted, and as slow as `--work-ms`),
    /// then the XP row. Its id.
    pub async fn work(&mut self) -> Result<i64, sqlx::Error> {
        let a = self.asked.clone();
        let binds = [
            Bind::Int(a.user_id),
            Bind::Int(a.amount.into()),
            Bind::Int(a.lesson.into()),
            Bind::Int(a.worker as i64),
        ];
        let xp = self.work_with(AWARD, &binds).await?.last_insert_id() as i64;
        self.note(format!("made XP #{xp}"));
        Ok(xp)
    }

    /// The award service's call, the work's step up to its statement: a
    /// crash `after-claim` strikes before it, one `during-work` halfway
    /// through it. When it began, in ms since the gate.
    async fn call_service(&mut self) -> Result<f64, sqlx::Error> {
        self.turn(Step::Work).await?;
        if self.strike(FaultPoint::AfterClaim, "before its work").await {
            return Err(crashed());
        }
        let start_ms = self.now_ms();
        if let Some(hang_ups) = self.hang_up.take() {
            hang_ups.work_began(self.asked.worker);
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.service_calls += 1;
        pause(self.work / 2).await;
        // Halfway: the call was made, the XP row not yet written.
        if self
            .strike(FaultPoint::DuringWork, "halfway through its work")
            .await
        {
            return Err(crashed());
        }
        pause(self.work - self.work / 2).await;
        Ok(start_ms)
    }

    /// The service call, then `sql` as the work's statement: one step.
    pub async fn work_with(
        &mut self,
        sql: &'static str,
        binds: &[Bind<'_>],
    ) -> Result<MySqlQueryResult, sqlx::Error> {
        let start_ms = self.call_service().await?;
        let out = bound(sql, binds).execute(&mut *self.conn).await;
        self.record(Step::Work, sql, start_ms, out.as_ref().err());
        out
    }

    /// The service call that fails (`--fail-work`): made, taking the
    /// work's time, and answering an error; no statement follows it.
    pub async fn failed_call(&mut self) -> Result<(), sqlx::Error> {
        let start_ms = self.call_service().await?;
        self.record(Step::Work, "", start_ms, None);
        self.note("the award service failed");
        Ok(())
    }

    /// With a heartbeat: `renew`, its `?`s bound to `parts` of the claim
    /// (its id `id`, its owner this request's worker), sent from the
    /// beats' own connection every so often, until the returned guard is
    /// dropped, however the request ends. A beat that fails or waits too
    /// long is a beat missed, as a real one is.
    pub fn beat(&self, renew: &'static str, parts: &[ClaimPart], id: i64) -> Heartbeat {
        let Some((every, pool)) = self.heartbeat.clone() else {
            return Heartbeat::none();
        };
        let me = self.asked.worker as i64;
        let values: Vec<i64> = parts
            .iter()
            .map(|part| match part {
                ClaimPart::Id => id,
                ClaimPart::Owner => me,
            })
            .collect();
        Heartbeat::spawn(async move {
            let binds: Vec<Bind> = values.iter().map(|v| Bind::Int(*v)).collect();
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let sent = bound(renew, &binds).execute(&pool);
                let _ = tokio::time::timeout(every.max(BEAT_LIMIT), sent).await;
            }
        })
    }

    /// A request ended on a server error: 500, the error kept.
    pub fn failed(&mut self, err: &sqlx::Error, saw: &str, made_xp: Option<i64>) -> Answered {
        let said = match ServerError::of(err) {
            Some(e) => format!("error {}", e.shown()),
            None => format!("error: {}", crate::controls::escaped(&err.to_string())),
        };
        // A server error's own note, made when it struck, stays.
        if self.steps.last().is_none_or(|e| e.note.is_empty()) {
            self.note(said.clone());
        }
        Answered {
            outcome: Outcome::Error,
            saw: saw.into(),
            did: match made_xp {
                Some(xp) => format!("made XP #{xp}; {said}"),
                None => said,
            },
            made_xp,
        }
    }
}

/// How a request reads the key back after its insert met 1062, inside its
/// transaction (`--read-back`, lesson 8 on InnoDB): claim-work-complete's
/// claim then runs as the find-or-create Rails met in rails/rails#54281:
/// find the key, insert it, and on a duplicate read it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ReadBack {
    /// A plain `SELECT`: a consistent read, from the transaction's snapshot.
    Plain,
    /// `LOCK IN SHARE MODE`: a locking read of the newest committed row,
    /// its shared lock beside the one the 1062 left (rails/rails#58733).
    Share,
    /// `FOR UPDATE`: a locking read that needs the row's exclusive lock.
    ForUpdate,
}

impl ReadBack {
    pub fn name(self) -> &'static str {
        match self {
            ReadBack::Plain => "plain",
            ReadBack::Share => "share",
            ReadBack::ForUpdate => "for-update",
        }
    }
}

/// A transaction's isolation level as MariaDB is told it: the statement
/// that sets it for the next transaction, and its name for the table.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    pub set: &'static str,
    pub name: &'static str,
}

/// Half of the work's time; none at all when the work takes none (a timer
/// of zero still waits for the clock's next tick, a millisecond).
async fn pause(time: Duration) {
    if !time.is_zero() {
        tokio::time::sleep(time).await;
    }
}

/// What a crashed worker's next statement meets: its session is gone.
fn crashed() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other("the worker crashed on purpose"))
}

/// The work's statement: one XP row.
pub const AWARD: &str = "INSERT INTO experience_points (user_id, amount, lesson, worker) \
                         VALUES (?, ?, ?, ?)";

fn bound<'q>(
    sql: &'q str,
    binds: &[Bind<'q>],
) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
    binds.iter().fold(sqlx::query(sql), |q, b| match b {
        Bind::Text(t) => q.bind(*t),
        Bind::OptText(t) => q.bind(*t),
        Bind::Int(i) => q.bind(*i),
        Bind::OptInt(i) => q.bind(*i),
        Bind::Bytes(b) => q.bind(*b),
    })
}
