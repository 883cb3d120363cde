//! The stepped race's clock: pending claims made older than the stale-claim age at a chosen turn, by setting their time, never by sleeping.
//!
//! A guard judges a claim stale by `locked_at < now() - age`. Moving every
//! pending `locked_at` back by more than the age is, to the guard, the same
//! as that much time passing, and it happens at an exact point of the
//! schedule, so a takeover is explored as any other step is. Two things
//! real time would do differently are kept out on purpose:
//! - a claim whose row another transaction holds locked is skipped (`SKIP
//!   LOCKED`), so the clock never waits on a worker; that transaction's
//!   own update of the row, if it commits, writes a time of its own anyway;
//! - with a heartbeat, the claims of workers still running are skipped: the
//!   heartbeat would have renewed them meanwhile. A finished or crashed
//!   owner beats no more, and its claim ages.

use std::time::Duration;

use sqlx::PgPool;

use super::book;

/// How far past the stale-claim age the clock moves a claim, so that the
/// few milliseconds a step takes never decide whether it is stale.
const MARGIN: Duration = Duration::from_secs(1);

/// The clock of one stepped race.
#[derive(Debug, Clone)]
pub struct Clock {
    on: On,
    /// The stale-claim age, plus [`MARGIN`].
    by: Duration,
    /// Whether a heartbeat keeps running workers' claims young.
    heartbeat: bool,
}

/// Where the claims the clock ages live.
#[derive(Debug, Clone)]
enum On {
    /// PostgreSQL: the run's schema, reached through the bookkeeping pool.
    Postgres { meta: PgPool, schema: String },
    /// MariaDB: the run's database, reached through its bookkeeping pool
    /// (node 1's, on a cluster), and on a cluster the other nodes, where a
    /// claim may be locked too.
    Mariadb {
        admin: sqlx::MySqlPool,
        others: Vec<sqlx::MySqlPool>,
    },
    /// Redis (`--store redis`): the claims' time to live runs out.
    Redis(std::sync::Arc<super::redis_server::Redis>),
}

impl Clock {
    /// The clock of a race in `schema` whose claims go stale after
    /// `stale_after`.
    pub fn new(meta: PgPool, schema: &str, stale_after: Duration, heartbeat: bool) -> Self {
        Self {
            on: On::Postgres {
                meta,
                schema: schema.to_string(),
            },
            by: stale_after + MARGIN,
            heartbeat,
        }
    }

    /// The clock of a race in the MariaDB database `admin` works in; with
    /// a `heartbeat`, running workers' claims do not age.
    pub fn on_mariadb(
        (admin, others): (sqlx::MySqlPool, Vec<sqlx::MySqlPool>),
        stale_after: Duration,
        heartbeat: bool,
    ) -> Self {
        Self {
            on: On::Mariadb { admin, others },
            by: stale_after + MARGIN,
            heartbeat,
        }
    }

    /// The clock of a race whose claims live in `redis`: a jump is their
    /// time to live running out, whatever it was.
    pub fn on_redis(redis: std::sync::Arc<super::redis_server::Redis>) -> Self {
        Self {
            on: On::Redis(redis),
            by: MARGIN,
            heartbeat: false,
        }
    }

    /// What a jump that aged `n` claims did, in words.
    pub fn told(&self, n: u64) -> String {
        let claims = if n == 1 { "claim" } else { "claims" };
        match (&self.on, n) {
            (_, 0) => "the clock jumps: no pending claim to age".into(),
            (On::Redis(_), 1) => "the clock jumps: 1 pending claim's time to live ran out".into(),
            (On::Redis(_), _) => {
                format!("the clock jumps: {n} pending claims' time to live ran out")
            }
            _ => format!(
                "the clock jumps: {n} pending {claims} {} now older than the stale-claim age",
                if n == 1 { "is" } else { "are" }
            ),
        }
    }

    /// The pending claims the clock would age with `running` workers still
    /// running, unlocked; the claim ids.
    fn aging(schema: &str) -> String {
        format!(
            "SELECT id FROM \"{}\".idempotency_keys
             WHERE status = 'pending'
               AND (NOT $1 OR worker IS NULL OR worker <> ALL($2::int4[]))
             FOR UPDATE SKIP LOCKED",
            schema
        )
    }

    /// How many claims a jump would age now.
    pub async fn would_age(&self, running: &[usize]) -> sqlx::Result<usize> {
        let (meta, schema) = match &self.on {
            On::Postgres { meta, schema } => (meta, schema),
            On::Mariadb { admin, others } => {
                let beating = self.heartbeat.then_some(running);
                return crate::db::mariadb::age_claims((admin, others), None, beating)
                    .await
                    .map(|n| n as usize);
            }
            On::Redis(redis) => {
                return redis
                    .age_claims(false)
                    .await
                    .map(|n| n as usize)
                    .map_err(other);
            }
        };
        let mut tx = meta.begin().await?;
        let ids: Vec<i64> = book::query_scalar(&Self::aging(schema))
            .bind(self.heartbeat)
            .bind(owners(running))
            .fetch_all(&mut *tx)
            .await?;
        tx.rollback().await?;
        Ok(ids.len())
    }

    /// Ages the claims; how many it aged.
    pub async fn jump(&self, running: &[usize]) -> sqlx::Result<u64> {
        let (meta, schema) = match &self.on {
            On::Postgres { meta, schema } => (meta, schema),
            On::Mariadb { admin, others } => {
                let beating = self.heartbeat.then_some(running);
                let nodes = (admin, &others[..]);
                return crate::db::mariadb::age_claims(nodes, Some(self.by), beating).await;
            }
            On::Redis(redis) => return redis.age_claims(true).await.map_err(other),
        };
        let sql = format!(
            "WITH aging AS ({})
             UPDATE \"{}\".idempotency_keys AS k
             SET locked_at = k.locked_at - make_interval(secs => $3)
             FROM aging WHERE k.id = aging.id",
            Self::aging(schema),
            schema
        );
        let mut tx = meta.begin().await?;
        let aged = book::query(&sql)
            .bind(self.heartbeat)
            .bind(owners(running))
            .bind(self.by.as_secs_f64())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(aged)
    }
}

/// A Redis error where the clock's callers take sqlx's.
fn other(err: anyhow::Error) -> sqlx::Error {
    sqlx::Error::Protocol(err.to_string())
}

fn owners(running: &[usize]) -> Vec<i32> {
    running
        .iter()
        .map(|&w| i32::try_from(w).unwrap_or(i32::MAX))
        .collect()
}
