//! The migrations in `migrations/`, built into the binary and applied by sqlx in one transaction.
//!
//! They are listed here by hand rather than with `sqlx::migrate!` so that sqlx
//! builds without its macros; a test checks that this list and the folder agree.
//!
//! Each run migrates a schema of its own that was made a moment before, so
//! there is no history to consult and nothing to serialise with other runs:
//! the files run in order, as simple queries, inside one transaction whose
//! `SET LOCAL search_path` names the run's schema. sqlx's `Migrator` is not
//! used: its history table is read and written with named statements,
//! which a pooler in transaction mode would leave on a server connection
//! for the next client to trip over.

use anyhow::{Context, Result};
use sqlx::PgConnection;

/// Every migration file, in order: (version, description, SQL).
pub const FILES: &[(i64, &str, &str)] = &[
    (
        1,
        "idempotency keys",
        include_str!("../../migrations/0001_idempotency_keys.sql"),
    ),
    (
        2,
        "experience points",
        include_str!("../../migrations/0002_experience_points.sql"),
    ),
    (
        3,
        "experience points lesson",
        include_str!("../../migrations/0003_experience_points_lesson.sql"),
    ),
    (
        4,
        "cache entries",
        include_str!("../../migrations/0004_cache_entries.sql"),
    ),
    (
        5,
        "award calls",
        include_str!("../../migrations/0005_award_calls.sql"),
    ),
    (
        6,
        "fencing token",
        include_str!("../../migrations/0006_fencing_token.sql"),
    ),
];

/// The same tables on MariaDB (`--engine mariadb`), in InnoDB's SQL, from
/// `migrations/mariadb/`.
pub const MARIADB_FILES: &[(i64, &str, &str)] = &[
    (
        1,
        "idempotency keys",
        include_str!("../../migrations/mariadb/0001_idempotency_keys.sql"),
    ),
    (
        2,
        "experience points",
        include_str!("../../migrations/mariadb/0002_experience_points.sql"),
    ),
    (
        3,
        "cache entries",
        include_str!("../../migrations/mariadb/0003_cache_entries.sql"),
    ),
];

/// Applies every MariaDB migration to the database `conn` is in. MariaDB
/// commits a `CREATE TABLE` at once (DDL is not transactional there), so a
/// failure leaves the tables made before it, in the run's own database,
/// which goes with the run.
pub async fn apply_mariadb(conn: &mut sqlx::MySqlConnection) -> Result<()> {
    for &(version, description, sql) in MARIADB_FILES {
        sqlx::raw_sql(sql)
            .execute(&mut *conn)
            .await
            .with_context(|| format!("MariaDB migration {version} ({description}) failed"))?;
    }
    Ok(())
}

/// Applies every migration to `schema`, on `tx`: a transaction the caller
/// commits, so that the schema gets all of its tables or none.
pub async fn apply(tx: &mut PgConnection, schema: &str) -> Result<()> {
    sqlx::raw_sql(&format!("SET LOCAL search_path TO \"{schema}\""))
        .execute(&mut *tx)
        .await?;
    for &(version, description, sql) in FILES {
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("migration {version} ({description}) failed"))?;
    }
    Ok(())
}
