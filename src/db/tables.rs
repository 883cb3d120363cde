//! Emptying the run's tables between races: the cheap way for a handful of rows, and the thorough one after thousands.

use anyhow::{Context, Result};

use super::Database;

impl Database {
    /// Empties the race tables and restarts their ids, so every race starts
    /// from nothing and its first XP row is #1. DELETE on a handful of rows
    /// costs a fraction of TRUNCATE, which swaps every table file.
    pub async fn reset(&self) -> Result<()> {
        // One message of several statements: one implicit transaction, one
        // round trip, one server connection.
        let s = &self.schema;
        sqlx::raw_sql(&format!(
            "DELETE FROM \"{s}\".idempotency_keys;
             DELETE FROM \"{s}\".experience_points;
             DELETE FROM \"{s}\".cache_entries;
             DELETE FROM \"{s}\".award_calls;
             ALTER SEQUENCE \"{s}\".idempotency_keys_id_seq RESTART;
             ALTER SEQUENCE \"{s}\".experience_points_id_seq RESTART;
             ALTER SEQUENCE \"{s}\".cache_entries_id_seq RESTART;
             ALTER SEQUENCE \"{s}\".award_calls_id_seq RESTART;",
        ))
        .execute(&self.meta)
        .await
        .context("could not reset the tables")?;
        Ok(())
    }

    /// Empties the tables with TRUNCATE: slower than [`reset`](Self::reset)
    /// for a few rows, but it leaves no dead rows behind, so a benchmark
    /// after thousands of inserts starts from clean tables and indexes.
    pub async fn truncate(&self) -> Result<()> {
        let truncate = self
            .sql("TRUNCATE idempotency_keys, experience_points, cache_entries, award_calls RESTART IDENTITY");
        sqlx::raw_sql(&truncate)
            .execute(&self.meta)
            .await
            .context("could not truncate the tables")?;
        Ok(())
    }
}
