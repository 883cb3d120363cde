//! Effects counted in a MySQL-family server (`--count-database-url mysql://...` or `mariadb://...`): one query returning one whole number, run read-only and bounded on the server, its password never shown.
//!
//! What the query may do is narrowed as on PostgreSQL, with the server's
//! own means:
//! - it must read as a query (`SELECT`, `WITH`, `VALUES`, `TABLE`), and it
//!   runs as a derived table, `SELECT * FROM (query) AS idem_count`, where
//!   the server refuses `INTO OUTFILE`, `INTO DUMPFILE` or `INTO
//!   @variable`, so it cannot write a file; it is sent as a prepared
//!   statement, which holds one statement only, so a query that closes the
//!   derived table early to add a second (`...) AS x; DELETE ...`) is
//!   refused too;
//! - it runs in a `START TRANSACTION READ ONLY` transaction, which is
//!   rolled back, on a connection of its own that is closed after, so a
//!   named lock (`GET_LOCK`) or a session variable it set goes with it;
//! - the server stops it past the count's timeout (`max_statement_time`
//!   on MariaDB, `max_execution_time` on MySQL), and idem stops waiting
//!   shortly after either way.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{Column, ConnectOptions, Connection, Executor, Row, TypeInfo};

use crate::db::secret::{redact, scrub};

/// How long past the server's own timeout idem waits.
const MARGIN: Duration = Duration::from_secs(2);

/// Whether `url` names a MySQL-family server.
pub fn is_mysql(url: &str) -> bool {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("mysql" | "mariadb"))
}

/// A query that returns the number of effects so far, on a MySQL-family server.
#[derive(Debug, Clone)]
pub struct MySqlCounter {
    sql: String,
    options: MySqlConnectOptions,
    timeout: Duration,
    /// The URL with any password hidden.
    pub shown: String,
}

impl MySqlCounter {
    /// Checks the URL and the query's text (without connecting); the
    /// password is remembered so that no message shows it.
    pub fn new(sql: &str, url: &str, timeout: Duration) -> Result<Self> {
        let shown = redact(url);
        if sql.trim().is_empty() {
            bail!("--count-sql is empty; give a query such as SELECT count(*) FROM payments");
        }
        let sql = sql.trim().trim_end_matches(';').trim_end().to_owned();
        super::count::check_is_query(&sql)?;
        let url = match url.split_once("://") {
            Some((_, rest)) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let options = MySqlConnectOptions::from_str(&url)
            .map_err(|e| {
                anyhow::anyhow!("--count-database-url {shown}: {}", scrub(&e.to_string()))
            })?
            .disable_statement_logging();
        Ok(Self {
            sql,
            options,
            timeout,
            shown,
        })
    }

    /// Runs the count once before any request: a URL or a query that will
    /// not do is said before anything is sent.
    pub async fn check(&self) -> Result<Vec<String>> {
        self.count().await.map(|_| Vec::new())
    }

    /// The effects so far.
    pub async fn count(&self) -> Result<i64> {
        let counted = tokio::time::timeout(self.timeout + MARGIN, self.counted()).await;
        match counted {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(err)) => bail!("--count-sql failed on {}: {}", self.shown, said(&err)),
            Err(_) => bail!(
                "--count-sql did not finish within {} ms (--count-timeout-ms) on {}",
                self.timeout.as_millis(),
                self.shown
            ),
        }
    }

    async fn counted(&self) -> Result<i64> {
        let mut conn = MySqlConnection::connect_with(&self.options)
            .await
            .context("could not connect")?;
        let bounded = self.bound(&mut conn).await;
        let read = match bounded {
            Ok(()) => self.read(&mut conn).await,
            Err(err) => Err(err),
        };
        let _ = conn.close().await;
        read
    }

    /// The server's own limit on the statement: MariaDB's in seconds, or
    /// MySQL's in milliseconds.
    async fn bound(&self, conn: &mut MySqlConnection) -> Result<()> {
        let secs = self.timeout.as_secs_f64().max(0.001);
        let mariadb = format!("SET SESSION max_statement_time = {secs:.3}");
        if conn.execute(mariadb.as_str()).await.is_ok() {
            return Ok(());
        }
        let ms = self.timeout.as_millis().max(1);
        conn.execute(format!("SET SESSION max_execution_time = {ms}").as_str())
            .await
            .context("could not bound the count on the server")?;
        Ok(())
    }

    /// The query, read-only, in a transaction rolled back.
    async fn read(&self, conn: &mut MySqlConnection) -> Result<i64> {
        conn.execute("START TRANSACTION READ ONLY").await?;
        let wrapped = format!("SELECT * FROM ({}) AS idem_count", self.sql);
        let rows = sqlx::query(&wrapped).fetch_all(&mut *conn).await;
        let _ = conn.execute("ROLLBACK").await;
        let rows = rows?;
        let [row] = rows.as_slice() else {
            bail!("it must return one row; it returned {}", rows.len());
        };
        if row.len() != 1 {
            bail!("it must return one column; it returned {}", row.len());
        }
        let n = row
            .try_get::<i64, _>(0)
            .or_else(|_| {
                row.try_get::<u64, _>(0)
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            })
            .or_else(|_| row.try_get::<i32, _>(0).map(i64::from));
        let Ok(n) = n else {
            let ty = row.column(0).type_info().name();
            bail!("it must return one whole number; its column is {ty}");
        };
        if n < 0 {
            bail!("it returned {n}, not a count");
        }
        Ok(n)
    }
}

/// An error's causes in one line, each said once (a driver's error
/// repeats its source's text), with any remembered password removed.
fn said(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
    }
    scrub(&parts.join(": "))
}
