//! The role a guard file's statements run as: a login that can read and write the run's own tables and nothing else.
//!
//! A guard file is someone else's code (a course-mate's answer, a file
//! from a forum). Its statements go on the workers' connections, so those
//! connections log in as the run's guard role ([`role`]), never as the
//! cluster's superuser:
//! - not a superuser, and no other attribute (no CREATEDB, CREATEROLE,
//!   REPLICATION, BYPASSRLS), and a member of no role: so none of
//!   `pg_read_server_files`, `pg_write_server_files`,
//!   `pg_execute_server_program` (no `pg_read_file`, no server-side
//!   `lo_export`, no `COPY ... PROGRAM` or `COPY ... TO` a file);
//! - on the run's schema, `USAGE`, and on its tables `SELECT`, `INSERT`,
//!   `UPDATE` and `DELETE`, with its sequences: what the lesson's claim,
//!   work and completion need, and no `CREATE` anywhere (PostgreSQL 14 let
//!   every role create in `public`; idem's own clusters take that back).
//!   A role per run, so that two runs on one `idem db` cluster cannot
//!   reach each other's tables;
//! - nothing in schema `public`: PostgreSQL gives every role `USAGE` there,
//!   and so the right to call any function PUBLIC may execute in it (a
//!   `SECURITY DEFINER` function a learner's app made on an `idem db`
//!   cluster among them); idem's clusters take `USAGE` back from PUBLIC
//!   (the roles that own or were granted what is there keep it), and the
//!   role's `search_path` is the run's schema alone. What it can still
//!   see is what every role sees in `pg_catalog`: the names of schemas,
//!   tables and roles (other runs' `idem_*` schemas among them), never
//!   their rows, and the built-in functions;
//! - no extension is installed in idem's clusters, so no `dblink`.
//!
//! The role is made only on a cluster idem has proven its own (see
//! [`super::ownership`]): on a server of the user's, guard files do not run.

use anyhow::{Context, Result};

use sqlx::PgConnection;

use super::book;

/// The guard role of the run whose schema is `schema` (`idem_0a1b2c3d`):
/// `idem_0a1b2c3d_guard`.
pub fn role(schema: &str) -> String {
    format!("{schema}_guard")
}

/// Makes the run's guard role (see [`role`]) if the cluster has none yet,
/// and lets it work on the tables of `schema`, the run's; returns its
/// name. Only on a cluster of idem's (the caller has proven it), in a
/// bookkeeping transaction `tx` the caller commits; `name` is the guard
/// file's, for a message.
pub async fn grant(tx: &mut PgConnection, schema: &str, name: &str) -> Result<String> {
    let role = role(schema);
    let statements = format!(
        "DO $$ BEGIN
             CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
                 NOBYPASSRLS NOINHERIT;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
         END $$;
         REVOKE CREATE, USAGE ON SCHEMA public FROM PUBLIC;
         ALTER ROLE {role} SET search_path = \"{schema}\";
         GRANT USAGE ON SCHEMA \"{schema}\" TO {role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \"{schema}\" TO {role};
         GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA \"{schema}\" TO {role};"
    );
    // The same race run again, or an app replica, finds its run's role
    // made; granting again at once from several processes would collide.
    let made: bool = book::query_scalar(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)
                THEN has_schema_privilege($1, $2, 'USAGE') ELSE false END",
    )
    .bind(&role)
    .bind(schema)
    .fetch_one(&mut *tx)
    .await?;
    if made {
        return Ok(role);
    }
    sqlx::raw_sql(&statements)
        .execute(&mut *tx)
        .await
        .with_context(|| format!("could not make the role {name} runs as"))?;
    Ok(role)
}
