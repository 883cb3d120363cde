//! Effects counted where they land: a user's query, run read-only on the user's database, before and after.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio_postgres::NoTls;
use tokio_postgres::types::Type;

use crate::db::secret::{redact, scrub};

/// How long connecting and counting may take.
const COUNT_TIMEOUT: Duration = Duration::from_secs(15);

/// A query that returns the number of effects so far, and where it runs.
#[derive(Debug, Clone)]
pub struct Counter {
    sql: String,
    config: tokio_postgres::Config,
    /// The database URL with any password hidden.
    pub shown: String,
}

impl Counter {
    /// Checks the URL (without connecting); its password is remembered so
    /// that no message ever shows it.
    pub fn new(sql: &str, url: &str) -> Result<Self> {
        let shown = redact(url);
        if sql.trim().is_empty() {
            bail!("--count-sql is empty; give a query such as SELECT count(*) FROM payments");
        }
        if url.trim().is_empty() {
            bail!("--count-database-url is empty");
        }
        let config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
            anyhow::anyhow!(
                "--count-database-url {shown} is not a connection string: {}",
                scrub(&e.to_string())
            )
        })?;
        Ok(Self {
            sql: sql.trim().trim_end_matches(';').to_owned(),
            config,
            shown,
        })
    }

    /// Runs the query in a read-only transaction that is rolled back, so it
    /// cannot change anything whatever it says; returns its one number.
    pub async fn count(&self) -> Result<i64> {
        tokio::time::timeout(COUNT_TIMEOUT, self.count_now())
            .await
            .map_err(|_| {
                anyhow::anyhow!("--count-sql took longer than {} s", COUNT_TIMEOUT.as_secs())
            })?
    }

    async fn count_now(&self) -> Result<i64> {
        let (client, connection) = self.config.connect(NoTls).await.map_err(|e| {
            let cause = e
                .as_db_error()
                .map(|d| d.message().to_owned())
                .unwrap_or_else(|| e.to_string());
            anyhow::anyhow!(
                "could not connect to {} for --count-sql: {}",
                self.shown,
                scrub(&cause)
            )
        })?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let counted = async {
            client.batch_execute("BEGIN READ ONLY").await?;
            // One statement only: the extended protocol refuses a second.
            let rows = client.query(self.sql.as_str(), &[]).await;
            let _ = client.batch_execute("ROLLBACK").await;
            anyhow::Ok(rows?)
        };
        let rows = counted.await.map_err(|e| {
            let cause = e
                .downcast_ref::<tokio_postgres::Error>()
                .and_then(|e| e.as_db_error().map(|d| d.message().to_owned()))
                .unwrap_or_else(|| format!("{e:#}"));
            anyhow::anyhow!("--count-sql failed: {}", scrub(&cause))
        });
        driver.abort();
        let rows = rows?;
        let [row] = rows.as_slice() else {
            bail!(
                "--count-sql must return one row with one number; it returned {} rows",
                rows.len()
            );
        };
        if row.len() != 1 {
            bail!(
                "--count-sql must return one column; it returned {}",
                row.len()
            );
        }
        let number = match *row.columns()[0].type_() {
            Type::INT8 => row.try_get::<_, Option<i64>>(0)?,
            Type::INT4 => row.try_get::<_, Option<i32>>(0)?.map(i64::from),
            Type::INT2 => row.try_get::<_, Option<i16>>(0)?.map(i64::from),
            ref other => bail!(
                "--count-sql must return a whole number (bigint, integer); it returned {other}: cast it with ::bigint"
            ),
        };
        number.context("--count-sql returned NULL; wrap it in coalesce(..., 0)")
    }
}
