//! idem's bookkeeping through sqlx, in the one shape a pooler in transaction mode passes safely: unnamed statements inside a transaction.
//!
//! sqlx sends a statement with parameters in two round trips (parse and
//! describe, then bind and execute), and names it so that it can run it
//! again. Through PgBouncer in transaction mode each round trip outside a
//! transaction may reach another server connection: the bind would then
//! run whatever statement of that name or the unnamed one another client
//! left there. Inside a transaction PgBouncer keeps the client on one
//! server connection, and an unnamed statement leaves nothing behind for
//! the next client. So every bookkeeping statement is made here, unnamed,
//! and run on a [`Database::book`](super::Database::book) transaction, or
//! is a single simple query (`sqlx::raw_sql`), which is one message.

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{FromRow, Postgres};

/// `sqlx::query`, unnamed.
pub fn query(sql: &str) -> Query<'_, Postgres, PgArguments> {
    sqlx::query(sql).persistent(false)
}

/// `sqlx::query_as`, unnamed.
pub fn query_as<'q, T>(sql: &'q str) -> QueryAs<'q, Postgres, T, PgArguments>
where
    T: for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_as(sql).persistent(false)
}

/// `sqlx::query_scalar`, unnamed.
pub fn query_scalar<'q, T>(sql: &'q str) -> QueryScalar<'q, Postgres, T, PgArguments>
where
    (T,): for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_scalar(sql).persistent(false)
}
