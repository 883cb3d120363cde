//! Effects counted where they land: a user's query, checked to be one read-only query returning one whole number, then run read-only on the user's database, before and after, in a function that cannot leave its role.
//!
//! The query comes from the command line and runs on the user's database,
//! so what it may do is narrowed four times:
//! - before anything runs, it must read as a query (`SELECT`, `WITH`,
//!   `VALUES`, `TABLE`, after any comments) and the server must parse it
//!   as one statement with one column of a whole-number type: `COPY`,
//!   `SET`, `CALL`, several statements and the like are refused;
//! - it runs as the body of a temporary `SECURITY DEFINER` SQL function,
//!   made inside the count's transaction (and gone with its rollback).
//!   Inside such a function PostgreSQL refuses to change `role` or
//!   `session_authorization` (`SET ROLE`, `set_config('role', ...)`,
//!   `RESET ROLE`, `SET SESSION AUTHORIZATION`), so the query keeps the
//!   function owner's rights. A superuser's function is handed to
//!   `pg_read_all_data` (PostgreSQL 14+) first: it reads every table and
//!   view, and may not end sessions, run programs, write files, or open
//!   a `dblink` without a password;
//! - the function is `STABLE` and called in a `READ ONLY` transaction with
//!   a `statement_timeout`, which is rolled back: no table, sequence or
//!   setting changes. A count that takes an advisory lock is refused, and
//!   the lock released before the rollback (a session lock would outlive
//!   it, on a pooler's server connection too);
//! - if the server does not give up in time, idem cancels the statement
//!   on the server (a cancel request), so no backend is left running it.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::db::secret::{redact, scrub};
use crate::db::url::DatabaseUrl;

/// How long past the server's own timeout idem waits before it cancels.
const CANCEL_MARGIN: Duration = Duration::from_secs(2);

/// What the count's session is, asked before its function is made.
const SESSION: &str = "SELECT pg_is_in_recovery(), current_setting('is_superuser') = 'on', \
     EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_read_all_data')";

/// The advisory locks the count's session holds.
const ADVISORY_LOCKS: &str =
    "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'";

/// What the query may begin with, after comments.
const QUERY_WORDS: [&str; 4] = ["select", "with", "values", "table"];

/// A query that returns the number of effects so far, and where it runs.
#[derive(Clone)]
pub struct SqlCounter {
    sql: String,
    config: tokio_postgres::Config,
    /// TLS as the URL's `sslmode` says.
    tls: MakeRustlsConnect,
    timeout: Duration,
    /// The database URL with any password hidden.
    shown: String,
    /// Whether the URL reaches a disposable cluster idem started.
    disposable: bool,
}

impl SqlCounter {
    /// Checks the URL and the query's text (without connecting); the URL's
    /// password is remembered so that no message ever shows it.
    pub fn new(sql: &str, url: &str, timeout: Duration) -> Result<Self> {
        let shown = redact(url);
        if sql.trim().is_empty() {
            bail!("--count-sql is empty; give a query such as SELECT count(*) FROM payments");
        }
        if url.trim().is_empty() {
            bail!("--count-database-url is empty");
        }
        let sql = sql.trim().trim_end_matches(';').trim_end().to_owned();
        check_is_query(&sql)?;
        let url =
            DatabaseUrl::parse(url).map_err(|e| anyhow::anyhow!("--count-database-url: {e}"))?;
        let mut config = url.for_workers();
        config.connect_timeout(timeout);
        let tls = url.tls().connector()?;
        // Only to leave out a note: the name is enough for that.
        let disposable = url.idem_run_socket().is_some();
        Ok(Self {
            sql,
            config,
            tls,
            timeout,
            shown,
            disposable,
        })
    }

    /// Asks the server whether the query is one statement returning one
    /// whole number, and makes (and rolls back) the function it runs in,
    /// before it is ever run; returns notes for the user (a superuser's URL).
    pub async fn check(&self) -> Result<Vec<String>> {
        self.bounded(async {
            let (client, _driver) = self.connect().await?;
            // In a transaction, and closed inside it: behind a pooler in
            // transaction mode a statement prepared outside one would stay
            // on a server connection that then serves other clients.
            client.batch_execute("BEGIN").await?;
            let contained = self.contained(&client).await;
            let _ = client.batch_execute("ROLLBACK").await;
            let mut notes = Vec::new();
            // A superuser is the only user of idem's own disposable
            // cluster: nothing to say about a URL idem handed out.
            if contained?.superuser && !self.disposable {
                notes.push(
                    "--count-database-url is a superuser's: the count runs as pg_read_all_data \
                     (it reads every table and changes nothing)"
                        .to_owned(),
                );
            }
            Ok(notes)
        })
        .await
    }

    /// Runs the query in a read-only transaction that is rolled back, and
    /// returns its one number.
    pub async fn count(&self) -> Result<i64> {
        self.bounded(async {
            let (client, _driver) = self.connect().await?;
            let cancel = client.cancel_token();
            // Prepared, run and closed inside the transaction, so that a
            // pooler in transaction mode keeps all three on one server
            // connection and nothing stays there for another client.
            let counted = async {
                client
                    .batch_execute(&format!(
                        "BEGIN; SET LOCAL statement_timeout = {}",
                        self.timeout.as_millis()
                    ))
                    .await
                    .map_err(|e| self.failed(&e))?;
                let rows = async {
                    let contained = self.contained(&client).await?;
                    let locks_before = advisory_locks(&client).await?;
                    let rows = client
                        .query(contained.call.as_str(), &[])
                        .await
                        .map_err(|e| self.failed(&e))?;
                    self.took_no_lock(&client, locks_before).await?;
                    Ok::<_, anyhow::Error>(rows)
                }
                .await;
                let _ = client.batch_execute("ROLLBACK").await;
                rows
            };
            // The server gives up at its statement_timeout; should it not
            // (a network that lost the error, say), the statement is
            // cancelled there, not merely abandoned here.
            let rows = match tokio::time::timeout(self.timeout + CANCEL_MARGIN, counted).await {
                Ok(rows) => rows?,
                Err(_) => {
                    let _ = cancel.cancel_query(self.tls.clone()).await;
                    bail!(self.too_slow());
                }
            };
            number_of(&rows)
        })
        .await
    }

    /// Makes the count's function in this transaction (see the module's
    /// notes) and turns the transaction read-only; returns how to call it.
    async fn contained(&self, client: &Client) -> Result<Contained> {
        let statement = self.prepare(client).await?;
        let returns = match *statement.columns()[0].type_() {
            Type::INT8 => "bigint",
            Type::INT4 => "integer",
            _ => "smallint",
        };
        drop(statement);
        let row = client.query_typed_one(SESSION, &[]).await?;
        let (in_recovery, superuser, readers): (bool, bool, bool) =
            (row.get(0), row.get(1), row.get(2));
        if in_recovery {
            bail!(
                "--count-database-url {} is a standby (in recovery): the count runs in a temporary function, \
                 which a standby cannot make; give the primary's URL",
                self.shown
            );
        }
        if superuser && !readers {
            bail!(
                "--count-database-url {} connects as a superuser, and this server has no pg_read_all_data \
                 (PostgreSQL 14+) for the count to run as; give a role that can only read",
                self.shown
            );
        }
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("pg_temp.idem_count_{unique}");
        let tag = format!("$idem_{unique}$");
        if self.sql.contains(&tag) {
            bail!("--count-sql holds {tag}, which idem quotes it with; run it again");
        }
        let made = client
            .batch_execute(&format!(
                "CREATE FUNCTION {name}() RETURNS SETOF {returns} LANGUAGE sql STABLE SECURITY DEFINER \
                 AS {tag}\n{}\n{tag}",
                self.sql
            ))
            .await;
        if let Err(e) = made {
            if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                bail!(
                    "--count-sql runs inside a temporary function, and {}'s role may not make temporary \
                     objects there: {} (GRANT TEMPORARY ON DATABASE ... TO the role)",
                    self.shown,
                    scrub(&db_message(&e))
                );
            }
            return Err(self.failed(&e));
        }
        if superuser {
            client
                .batch_execute(&format!(
                    "ALTER FUNCTION {name}() OWNER TO pg_read_all_data"
                ))
                .await
                .map_err(|e| self.failed(&e))?;
        }
        client
            .batch_execute("SET TRANSACTION READ ONLY")
            .await
            .map_err(|e| self.failed(&e))?;
        Ok(Contained {
            call: format!("SELECT * FROM {name}()"),
            superuser,
        })
    }

    /// Refuses a count that took an advisory lock, after releasing it: a
    /// session-level lock would outlive the transaction's rollback (and,
    /// behind a pooler, stay on a server connection another client gets).
    async fn took_no_lock(&self, client: &Client, before: i64) -> Result<()> {
        let after = advisory_locks(client).await?;
        if after <= before {
            return Ok(());
        }
        let released = match before {
            // Every advisory lock the session holds is the count's own.
            0 => {
                client
                    .batch_execute("SELECT pg_advisory_unlock_all()")
                    .await
                    .map_err(|e| self.failed(&e))?;
                "released"
            }
            _ => "not released: the session held others before it",
        };
        bail!(
            "--count-sql took {} advisory lock{} ({released}); a count takes none",
            after - before,
            if after - before == 1 { "" } else { "s" }
        )
    }

    /// Runs `work` within the count's time (connecting included).
    async fn bounded<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let limit = self.timeout + CANCEL_MARGIN * 2;
        tokio::time::timeout(limit, work)
            .await
            .map_err(|_| anyhow::anyhow!(self.too_slow()))?
    }

    fn too_slow(&self) -> String {
        format!(
            "--count-sql took longer than {} ms (--count-timeout-ms) and was cancelled on the server",
            self.timeout.as_millis()
        )
    }

    /// A connection; the returned guard stops its driver when dropped.
    async fn connect(&self) -> Result<(Client, Driver)> {
        let (client, connection) = self.config.connect(self.tls.clone()).await.map_err(|e| {
            let said = scrub(&db_message(&e));
            let hint = crate::db::sslmode::hint_for(&said);
            anyhow::anyhow!(
                "could not connect to {} for --count-sql: {said}{hint}",
                self.shown
            )
        })?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, Driver::from(driver)))
    }

    /// The query parsed by the server as one statement with one
    /// whole-number column; nothing is run.
    async fn prepare(&self, client: &Client) -> Result<Statement> {
        let statement = client.prepare(&self.sql).await.map_err(|e| {
            if e.code() == Some(&SqlState::SYNTAX_ERROR)
                && db_message(&e).contains("multiple commands")
            {
                anyhow::anyhow!("--count-sql must be one statement; it holds several")
            } else {
                anyhow::anyhow!("--count-sql failed: {}", scrub(&db_message(&e)))
            }
        })?;
        let columns = statement.columns();
        let [column] = columns else {
            bail!(
                "--count-sql must return one column with one number; it returns {}",
                columns.len()
            );
        };
        if !matches!(*column.type_(), Type::INT8 | Type::INT4 | Type::INT2) {
            bail!(
                "--count-sql must return a whole number (bigint, integer); it returns {}: cast it with ::bigint",
                column.type_()
            );
        }
        Ok(statement)
    }

    fn failed(&self, e: &tokio_postgres::Error) -> anyhow::Error {
        if e.code() == Some(&SqlState::QUERY_CANCELED) {
            return anyhow::anyhow!(self.too_slow());
        }
        anyhow::anyhow!("--count-sql failed: {}", scrub(&db_message(e)))
    }
}

impl std::fmt::Debug for SqlCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlCounter")
            .field("sql", &self.sql)
            .field("shown", &self.shown)
            .finish_non_exhaustive()
    }
}

/// The count's function, made in its transaction.
struct Contained {
    /// The statement that calls it.
    call: String,
    /// The session is a superuser's, so the function runs as `pg_read_all_data`.
    superuser: bool,
}

/// How many advisory locks the session holds (granted or awaited).
async fn advisory_locks(client: &Client) -> Result<i64> {
    Ok(client.query_typed_one(ADVISORY_LOCKS, &[]).await?.get(0))
}

/// Aborts a connection's driver task when dropped, closing the connection.
type Driver = crate::tasks::AbortOnDrop;

/// The server's message when there is one, else the driver's.
fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_else(|| e.to_string())
}

/// The one number in the one row.
fn number_of(rows: &[tokio_postgres::Row]) -> Result<i64> {
    let [row] = rows else {
        bail!(
            "--count-sql must return one row with one number; it returned {} rows",
            rows.len()
        );
    };
    let number = match *row.columns()[0].type_() {
        Type::INT8 => row.try_get::<_, Option<i64>>(0)?,
        Type::INT4 => row.try_get::<_, Option<i32>>(0)?.map(i64::from),
        _ => row.try_get::<_, Option<i16>>(0)?.map(i64::from),
    };
    number.context("--count-sql returned NULL; wrap it in coalesce(..., 0)")
}

/// Refuses a text that does not begin as a query does.
pub(super) fn check_is_query(sql: &str) -> Result<()> {
    let text = skip_comments(sql);
    if text.starts_with('(') {
        return Ok(());
    }
    let word: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    if QUERY_WORDS.contains(&word.as_str()) {
        return Ok(());
    }
    let began = match word.is_empty() {
        true => "something else".to_owned(),
        false => word.to_ascii_uppercase(),
    };
    bail!("--count-sql must be a query (SELECT, WITH, VALUES or TABLE); it begins with {began}")
}

/// `sql` past its leading white space and comments (`-- ...` and nested `/* */`).
fn skip_comments(mut sql: &str) -> &str {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if sql.starts_with("/*") {
            let mut depth = 0usize;
            let mut end = sql.len();
            let bytes = sql.as_bytes();
            let mut i = 0;
            while i + 1 < bytes.len() {
                match &bytes[i..i + 2] {
                    b"/*" => {
                        depth += 1;
                        i += 2;
                    }
                    b"*/" => {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => i += 1,
                }
            }
            sql = &sql[end..];
        } else {
            return sql;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_is_query;

    #[test]
    fn only_queries_are_taken() {
        for ok in [
            "SELECT count(*) FROM t",
            "  select 1",
            "-- effects\nWITH x AS (SELECT 1) SELECT count(*) FROM x",
            "/* a /* nested */ note */ VALUES (1)",
            "(SELECT 1)",
            "TABLE counts",
        ] {
            assert!(check_is_query(ok).is_ok(), "{ok}");
        }
        for (refused, word) in [
            ("COPY (SELECT 1) TO PROGRAM 'touch /tmp/x'", "COPY"),
            ("-- hi\n  set statement_timeout = 0", "SET"),
            ("CALL p()", "CALL"),
            ("/* unterminated", "something else"),
            ("DELETE FROM t RETURNING 1", "DELETE"),
        ] {
            let err = check_is_query(refused).unwrap_err().to_string();
            assert!(
                err.ends_with(&format!("begins with {word}")),
                "{refused}: {err}"
            );
        }
    }
}
