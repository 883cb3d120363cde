//! What one race left behind: the figures, per worker and in total. Every report is made from it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::options::Synchronous;
use super::settings::{CrashPlan, RaceSettings, Transport};
use super::worker_report::WorkerReport;
use crate::db::RowCounts;
use crate::db::via::Via;
use crate::http::app::OnHangup;
use crate::request::Outcome;
use crate::store::StoreKind;
use crate::strategy::orm::Orm;
use crate::strategy::transaction::{Isolation, Transaction};
use crate::strategy::{LoserKind, StrategyKind};

/// The hot standby beside a race (`--standby`), measured at the race's end.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StandbyFigures {
    /// The user's standby (`--standby-url`), which idem only read.
    pub yours: bool,
    /// Its `recovery_min_apply_delay`, in ms (`--replica-delay-ms`).
    pub apply_delay_ms: u64,
    /// Where the strategy's finds read.
    pub read_from: super::options::ReadFrom,
    /// WAL the standby had not replayed, in bytes: the primary's
    /// `pg_current_wal_lsn()` less the standby's `pg_last_wal_replay_lsn()`.
    pub lag_bytes: i64,
    /// The primary's `replay_lag` for it, in ms: how long its last
    /// replayed commit took to be applied there; `null` on the user's
    /// standby, where reading it takes rights idem does not ask for.
    pub replay_lag_ms: Option<f64>,
    /// How the app's commits waited for it: `off` or `remote_apply`.
    pub synchronous: Synchronous,
    /// The delay of the link its WAL crossed, in ms; `null` without one.
    pub link_delay_ms: Option<u64>,
}

/// What a failover (`--failover`) left on each server.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverFigures {
    /// From the race's start to the cut, in ms: under the link's delay,
    /// everything the race wrote was still on its way.
    pub cut_after_ms: f64,
    /// WAL that was on the link when it was cut, and never arrived, in bytes.
    pub wal_lost_bytes: u64,
    /// How long `pg_promote()` took.
    pub promote_ms: f64,
    /// The old primary at the cut.
    pub old_primary: ServerCounts,
    /// The standby once promoted, before the retry reached it: what survived.
    pub promoted: ServerCounts,
    /// The new primary after the retry.
    pub new_primary: ServerCounts,
    /// The worker whose completed request was sent again.
    pub retried_worker: usize,
    /// What the retry was answered.
    pub retry_status: u16,
    /// Whether the key a 201 had been answered for was missing on the new
    /// primary: the acknowledged key was lost.
    pub acknowledged_key_lost: bool,
}

impl FailoverFigures {
    /// Whether an asynchronous failover found no WAL on the link to lose:
    /// the race's writes had all crossed before the cut, so a key kept
    /// proves nothing.
    pub fn untested(&self, synchronous: Synchronous) -> bool {
        synchronous == Synchronous::Off && self.wal_lost_bytes == 0
    }
}

/// One server's rows.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServerCounts {
    pub key_rows: u64,
    pub pending_key_rows: u64,
    pub xp_rows: u64,
}

impl From<&RowCounts> for ServerCounts {
    fn from(c: &RowCounts) -> Self {
        ServerCounts {
            key_rows: c.key_rows,
            pending_key_rows: c.pending_key_rows,
            xp_rows: c.xp_rows,
        }
    }
}

/// The XP rows a correct guard leaves: one per key.
pub const EXPECTED_XP_ROWS: u64 = 1;

/// One race's result. Its JSON form is one line of `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct RaceResult {
    pub run: usize,
    /// The strategy; with a guard file, the built-in of the file's shape.
    pub strategy: StrategyKind,
    /// The guard file raced in the strategy's place, as the user named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy_file: Option<&'static str>,
    /// How the requests reached the strategy: `in_process` or `http`.
    pub transport: Transport,
    /// Over HTTP: how many requests the app handled at once; `null` in-process.
    pub threads: Option<usize>,
    /// Over HTTP: how many processes of the app served the race (each its
    /// own pool and threads); 1 in-process.
    pub replicas: usize,
    /// How the app's pool reached PostgreSQL: `direct` or `pgbouncer`.
    pub via: Via,
    pub workers: usize,
    pub pool_size: usize,
    pub runner_holds_connection: bool,
    pub work_ms: u64,
    /// What a loser of the claim does; `null` for strategies without losers.
    pub loser_policy: Option<LoserKind>,
    /// Where the claims lived: `table` or `cache`.
    pub store: StoreKind,
    pub cache_pressure: u64,
    /// The crash planned for this race, if any (lesson 7).
    pub crash: Option<CrashPlan>,
    /// The client planned to hang up mid-request, if any (lesson 9); the
    /// app treats its abandoned request as `on_hangup` says.
    pub hang_up: Option<CrashPlan>,
    /// What the app does with a request whose client went away: `cancel`
    /// or `finish`.
    pub on_hangup: OnHangup,
    /// Whether each request ran in one transaction: `none` or `request`.
    pub transaction: Transaction,
    /// The request transaction's isolation level; `null` without one.
    pub isolation: Option<Isolation>,
    /// How many times a request may rerun its transaction after a serialization failure.
    pub retry_serialization: u32,
    pub key: String,
    pub key_rows: u64,
    /// Key rows still pending when the race ended: claims nobody completed
    /// (a crash, a hang-up, a claim the cache lost track of).
    pub pending_key_rows: u64,
    pub xp_rows: u64,
    pub expected_xp_rows: u64,
    /// XP rows beyond the one expected.
    pub duplicates: u64,
    /// Every outcome with how many workers had it.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Replays that answered a request with another request's result (no fingerprint check).
    pub wrong_replays: u64,
    pub elapsed_ms: f64,
    /// The XP rows the course predicts for these settings (see `RaceSettings::lesson_figure`).
    pub lesson_figure: u64,
    /// Times the work called the award service, retries included: a call no
    /// rollback undoes, counted apart from the rows.
    pub service_calls: u64,
    /// With `--standby`: the hot standby and how far behind it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyFigures>,
    /// With `--failover`: what each server kept. The race's own counts
    /// are then the new primary's, after the retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverFigures>,
    /// With `--store redis`: how the claims were set, and what other cache
    /// traffic did to them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<crate::strategy::redis_plan::RedisFigures>,
    pub reports: Vec<WorkerReport>,
    /// Whose statements check-then-store sent; shown in the settings line.
    #[serde(skip)]
    pub orm: Orm,
}

impl RaceResult {
    /// The strategy as a report names it: its name, or the guard file's
    /// with its shape (`guard.toml, a claim-work-complete`).
    pub fn strategy_label(&self) -> String {
        crate::strategy::guard_file::label(self.strategy, self.strategy_file)
    }

    /// What the retries after the race (a crashed or failed request sent
    /// again) were answered, in worker order.
    #[cfg(feature = "internals")]
    pub fn retry_statuses(&self) -> Vec<u16> {
        self.reports
            .iter()
            .filter(|w| w.retry)
            .map(|w| w.status)
            .collect()
    }

    pub fn new(
        run: usize,
        s: &RaceSettings,
        counts: RowCounts,
        reports: Vec<WorkerReport>,
        elapsed: Duration,
    ) -> Self {
        Self {
            run,
            strategy: s.app.strategy,
            strategy_file: s.app.guard_file.map(|f| f.0.name.as_str()),
            transport: s.requests.transport(),
            threads: (s.requests.transport() == Transport::Http).then_some(s.app.threads),
            replicas: s.app.replicas,
            via: s.app.pool.via(),
            workers: s.requests.workers(),
            pool_size: s.app.pool.size(),
            runner_holds_connection: s.app.pool.runner_holds_connection(),
            work_ms: s.work_ms(),
            loser_policy: s.loser_kind(),
            store: s.store.kind(),
            cache_pressure: s.store.cache_pressure(),
            crash: s.faults.crash(),
            hang_up: s.faults.hang_up(),
            on_hangup: s.app.on_hangup,
            transaction: s.app.transaction.scope(),
            isolation: (s.app.transaction.scope() == Transaction::Request)
                .then_some(s.app.transaction.isolation()),
            retry_serialization: s.app.transaction.retries(),
            key: s.requests.key().to_string(),
            orm: s.app.orm,
            key_rows: counts.key_rows,
            pending_key_rows: counts.pending_key_rows,
            xp_rows: counts.xp_rows,
            expected_xp_rows: EXPECTED_XP_ROWS,
            duplicates: counts.xp_rows.saturating_sub(EXPECTED_XP_ROWS),
            outcomes: count_outcomes(&reports),
            wrong_replays: reports.iter().filter(|r| r.wrong_replay.is_some()).count() as u64,
            elapsed_ms: elapsed.as_secs_f64() * 1000.0,
            lesson_figure: s.lesson_figure(),
            service_calls: 0,
            standby: None,
            failover: None,
            redis: None,
            reports,
        }
    }

    /// How many requests' transactions were rolled back on a database error.
    pub fn rolled_back(&self) -> u64 {
        if self.transaction != Transaction::Request {
            return 0;
        }
        self.reports
            .iter()
            .filter(|w| w.outcome == Outcome::Error && w.error.is_some())
            .count() as u64
    }

    /// Requests cut off after their work step began: crashed, their
    /// connection killed, or dropped by the app when their client hung
    /// up. Each may have called the service before it was cut off, and no
    /// guard takes a call back: a retry's call beside it is allowed. The
    /// race card and the explorer's verdict both count by this.
    pub fn cut_off_after_work(&self) -> u64 {
        let dropped = |w: &WorkerReport| {
            w.outcome == Outcome::HungUp && self.on_hangup == crate::http::app::OnHangup::Cancel
        };
        let faulted = |w: &WorkerReport| w.took(crate::request::Step::Fault);
        // A hang-up strikes only once the work has begun; a crash or a
        // killed connection may strike before it.
        let struck_mid_work = |w: &WorkerReport| {
            (w.outcome == Outcome::Crashed || faulted(w)) && w.took(crate::request::Step::Work)
        };
        self.reports
            .iter()
            .filter(|w| dropped(w) || struck_mid_work(w))
            .count() as u64
    }

    /// How many workers ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }
}

/// `4 ×993, 3 ×7`: the most frequent first.
pub fn histogram(h: &BTreeMap<u64, u64>) -> String {
    let mut entries: Vec<(u64, u64)> = h.iter().map(|(k, v)| (*k, *v)).collect();
    entries.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    entries
        .iter()
        .map(|(rows, runs)| format!("{rows} ×{runs}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `created 1000, duplicate 3000, replayed 1000`: the non-zero outcomes.
pub fn outcome_totals(outcomes: &BTreeMap<Outcome, u64>) -> String {
    Outcome::ALL
        .iter()
        .filter_map(|o| {
            outcomes
                .get(o)
                .filter(|c| **c > 0)
                .map(|c| format!("{} {c}", o.name()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `q`-th value of `values` (0.5 the median, 1.0 the largest); 0 if empty.
pub fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let index = ((values.len() - 1) as f64 * q).round() as usize;
    values[index.min(values.len() - 1)]
}

/// `1 XP row`, `4 XP rows`.
pub fn xp_rows(n: u64) -> String {
    match n {
        1 => "1 XP row".to_string(),
        n => format!("{n} XP rows"),
    }
}

/// Counts outcomes by name, listing every outcome (zero included) so JSON keys are stable.
pub fn count_outcomes(reports: &[WorkerReport]) -> BTreeMap<Outcome, u64> {
    let mut counts: BTreeMap<Outcome, u64> = Outcome::ALL.iter().map(|o| (*o, 0)).collect();
    for report in reports {
        *counts.entry(report.outcome).or_default() += 1;
    }
    counts
}
