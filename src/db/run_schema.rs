//! The run's own schema on a real server: made with a seal, proven before anything in it is touched, dropped without cascade.
//!
//! A name is no proof: anyone may create a schema called `idem_1a2b3c4d`.
//! So idem creates its schema and a one-row table `idem_run` inside it in
//! one transaction, and that row carries the run id and a seal (SHA-256 of
//! the run id and the schema name). A schema is idem's only when that row is
//! there and the seal checks out; nothing else is ever dropped, emptied or
//! reaped, whatever its name.
//!
//! Dropping is as careful: idem drops the tables it made, by name, then the
//! schema, both with RESTRICT and in one transaction. If anything idem did not
//! make depends on them (a view, a foreign key, a function's row type, a
//! table put inside the schema), PostgreSQL refuses, nothing is dropped, and
//! idem says what is in the way.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnection, PgDatabaseError};
use sqlx::{Acquire, Row};

use super::book;
use uuid::Uuid;

/// The table that marks a schema as idem's.
pub const MARK_TABLE: &str = "idem_run";

/// The tables idem makes in its schema: the mark, sqlx's migration history
/// and the migrations' tables. These, and their indexes and sequences, are
/// all it ever drops.
pub const OWN_TABLES: [&str; 6] = [
    "idempotency_keys",
    "experience_points",
    "cache_entries",
    "award_calls",
    "_sqlx_migrations",
    MARK_TABLE,
];

/// A new run's id and the name of its schema, `idem_` and the id's first 8 hex digits.
pub fn new_run() -> (Uuid, String) {
    let run_id = Uuid::new_v4();
    let schema = name_for(run_id);
    (run_id, schema)
}

/// Whether `name` has the shape of a run schema's name (no proof of anything).
pub fn looks_like_run_schema(name: &str) -> bool {
    name.len() == 13
        && name.starts_with("idem_")
        && name[5..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

fn name_for(run_id: Uuid) -> String {
    format!("idem_{}", &run_id.simple().to_string()[..8])
}

fn seal(run_id: Uuid, schema: &str) -> String {
    seal_of("schema", run_id, schema)
}

/// The seal of a run's `what` (a schema on PostgreSQL, a database on
/// MariaDB) named `name`: what proves idem made it for that run.
pub(crate) fn seal_of(what: &str, run_id: Uuid, name: &str) -> String {
    let digest = Sha256::digest(format!("idem run {what} v1\0{run_id}\0{name}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates the schema and its mark in one transaction: there is never an
/// idem schema without its mark, nor a mark without its schema.
pub async fn create(conn: &mut PgConnection, run_id: Uuid, schema: &str) -> Result<()> {
    let mut tx = conn.begin().await?;
    book::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut *tx)
        .await
        .with_context(|| format!("could not create schema {schema}"))?;
    book::query(&format!(
        "CREATE TABLE {schema}.{MARK_TABLE} (
             run_id       uuid        PRIMARY KEY,
             schema_name  text        NOT NULL,
             seal         text        NOT NULL,
             client_pid   integer     NOT NULL,
             kept         boolean     NOT NULL DEFAULT false,
             created_at   timestamptz NOT NULL DEFAULT now(),
             heartbeat_at timestamptz NOT NULL DEFAULT now()
         )"
    ))
    .execute(&mut *tx)
    .await?;
    book::query(&format!(
        "INSERT INTO {schema}.{MARK_TABLE} (run_id, schema_name, seal, client_pid)
         VALUES ($1::uuid, $2, $3, $4)"
    ))
    .bind(run_id.to_string())
    .bind(schema)
    .bind(seal(run_id, schema))
    .bind(std::process::id() as i32)
    .execute(&mut *tx)
    .await?;
    book::query(&format!(
        "COMMENT ON SCHEMA {schema} IS 'made by idem (run {run_id}); see {schema}.{MARK_TABLE}'"
    ))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What a schema's mark says.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    run_id: Uuid,
    /// Kept on purpose (`--keep`): never swept.
    pub(crate) kept: bool,
    /// Seconds since the run last said it was alive (server clock).
    pub(crate) heartbeat_age_s: f64,
}

/// The schema's mark, if it is idem's; `None` for anything idem cannot prove
/// it made (no mark table, another table of that name, a bad seal, ...).
pub async fn prove(conn: &mut PgConnection, schema: &str) -> Result<Option<Mark>> {
    if !looks_like_run_schema(schema) {
        return Ok(None);
    }
    let has_mark: bool = book::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'r')",
    )
    .bind(schema)
    .bind(MARK_TABLE)
    .fetch_one(&mut *conn)
    .await?;
    if !has_mark {
        return Ok(None);
    }
    // A table of that name with another shape is not a mark: the query
    // fails, and the schema is not idem's. It fails inside a savepoint, so
    // that the caller's transaction goes on.
    let mut savepoint = conn.begin().await?;
    let rows = book::query(&format!(
        "SELECT run_id::text, schema_name::text, seal::text, kept::bool,
                extract(epoch FROM now() - heartbeat_at)::float8
         FROM {schema}.{MARK_TABLE} LIMIT 2"
    ))
    .fetch_all(&mut *savepoint)
    .await;
    let Ok(rows) = rows else {
        savepoint.rollback().await?;
        return Ok(None);
    };
    savepoint.commit().await?;
    let [row] = rows.as_slice() else {
        return Ok(None);
    };
    let fields = (|| -> Result<_, sqlx::Error> {
        Ok((
            row.try_get::<String, _>(0)?,
            row.try_get::<String, _>(1)?,
            row.try_get::<String, _>(2)?,
            row.try_get::<bool, _>(3)?,
            row.try_get::<f64, _>(4)?,
        ))
    })();
    let Ok((run_id, schema_name, stored_seal, kept, age)) = fields else {
        return Ok(None);
    };
    let Ok(run_id) = Uuid::parse_str(&run_id) else {
        return Ok(None);
    };
    let proven =
        schema_name == schema && name_for(run_id) == schema && stored_seal == seal(run_id, schema);
    Ok(proven.then_some(Mark {
        run_id,
        kept,
        heartbeat_age_s: age,
    }))
}

/// Marks the schema as kept on purpose, so no later run sweeps it.
pub async fn keep(conn: &mut PgConnection, schema: &str) -> Result<()> {
    book::query(&format!("UPDATE {schema}.{MARK_TABLE} SET kept = true"))
        .execute(conn)
        .await
        .with_context(|| format!("could not mark schema {schema} as kept"))?;
    Ok(())
}

/// What became of a schema idem meant to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    Yes,
    /// Left in place, with PostgreSQL's own words for what is in the way.
    Left {
        blockers: String,
    },
}

/// Drops idem's own tables and then the schema, without CASCADE. The caller
/// has proven the schema is idem's. If something idem did not make depends
/// on them, nothing is dropped.
pub async fn drop_own(conn: &mut PgConnection, schema: &str) -> Result<Dropped> {
    let tables = OWN_TABLES
        .iter()
        .map(|t| format!("{schema}.{t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut tx = conn.begin().await?;
    // An empty search_path, so that PostgreSQL names every object that
    // stands in the way with its schema.
    sqlx::raw_sql("SET LOCAL lock_timeout = '10s'; SET LOCAL search_path = ''")
        .execute(&mut *tx)
        .await?;
    let dropped = async {
        book::query(&format!("DROP TABLE IF EXISTS {tables} RESTRICT"))
            .execute(&mut *tx)
            .await?;
        book::query(&format!("DROP SCHEMA {schema} RESTRICT"))
            .execute(&mut *tx)
            .await
    }
    .await;
    match dropped {
        Ok(_) => {
            tx.commit().await?;
            Ok(Dropped::Yes)
        }
        Err(err) => {
            let _ = tx.rollback().await;
            match blockers(&err) {
                Some(blockers) => Ok(Dropped::Left { blockers }),
                None => Err(err).with_context(|| format!("could not drop schema {schema}")),
            }
        }
    }
}

/// For "other objects depend on it": PostgreSQL's list of those objects.
fn blockers(err: &sqlx::Error) -> Option<String> {
    let db = err.as_database_error()?;
    if db.code().as_deref() != Some("2BP01") {
        return None;
    }
    let detail = db
        .try_downcast_ref::<PgDatabaseError>()
        .and_then(|e| e.detail())
        .unwrap_or(db.message());
    Some(detail.lines().collect::<Vec<_>>().join("; "))
}

/// The sentence idem prints when it leaves its schema in place.
pub fn left_message(schema: &str, blockers: &str) -> String {
    format!(
        "left schema {schema} in place: objects idem did not create depend on it ({blockers}); \
         idem drops nothing it did not make. When you no longer need them, \
         `DROP SCHEMA {schema} CASCADE` removes the schema and them"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_runs_name_and_seal_belong_together() {
        let (run_id, schema) = new_run();
        assert!(looks_like_run_schema(&schema));
        assert_eq!(name_for(run_id), schema);
        let (other, _) = new_run();
        assert_ne!(seal(run_id, &schema), seal(other, &schema));
        assert!(!looks_like_run_schema("idem_1A2B3C4D"));
        assert!(!looks_like_run_schema("idem_1a2b3c4d; DROP"));
    }
}
