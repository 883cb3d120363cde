//! Effects counted in a MySQL-family server (`--count-database-url mysql://...` or `mariadb://...`): one query returning one whole number, run read-only and bounded on the server, its password never shown.
//!
//! What the query may do is narrowed twice: by its form, which idem reads
//! as the server's lexer does, and by the server's own means.
//! - It must read as a query (`SELECT`, `WITH`, `VALUES`, `TABLE`), and it
//!   runs as a derived table, `SELECT * FROM (query) AS idem_count`. A
//!   textual wrapper holds only if the server reads the query as one
//!   parenthesised whole, so idem reads the query's tokens first and
//!   refuses, in one line, whatever could end the wrapper early or hide
//!   its close: a comment of any kind (`#`, `--`, `/* */`, and so
//!   MariaDB's executable `/*! */`), a `;`, a `)` that closes more than
//!   it opened, a string or quoted name left open, and a backslash (whose
//!   meaning inside a string depends on the server's `sql_mode`). The
//!   words `INTO`, `OUTFILE`, `DUMPFILE` and `LOAD_FILE` are refused
//!   outside quotes: a count writes and reads no file.
//! - It is sent as a prepared statement, which holds one statement only.
//! - it runs in a `START TRANSACTION READ ONLY` transaction, which is
//!   rolled back, on a connection of its own that is closed after, so a
//!   named lock (`GET_LOCK`) or a session variable it set goes with it;
//! - the server stops it past the count's timeout (`max_statement_time`
//!   on MariaDB, `max_execution_time` on MySQL), and idem stops waiting
//!   shortly after either way.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{Column, Connection, Executor, Row, TypeInfo};

use crate::db::mariadb::url::MysqlUrl;
use crate::db::secret::{redact, scrub};

/// How long past the server's own timeout idem waits.
const MARGIN: Duration = Duration::from_secs(2);

pub use crate::db::mariadb::url::is_mysql;

/// A query that returns the number of effects so far, on a MySQL-family server.
#[derive(Debug, Clone)]
pub struct MySqlCounter {
    sql: String,
    options: MySqlConnectOptions,
    timeout: Duration,
    /// The URL with any password hidden.
    shown: String,
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
        check_form(&sql)?;
        let options = MysqlUrl::parse(url, "--count-database-url")?.options;
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

/// Words a count may not say outside quotes: it writes and reads no file.
const FORBIDDEN_WORDS: [&str; 4] = ["into", "outfile", "dumpfile", "load_file"];

/// Refuses a query whose tokens could end idem's derived table early,
/// hide its close, or touch a file, reading it as MySQL's lexer reads
/// (strings in `'` or `"`, names in `` ` ``, a doubled quote inside either).
fn check_form(sql: &str) -> Result<()> {
    let refuse = |why: &str| -> Result<()> {
        bail!("--count-sql may not hold {why}: a count is one plain query, run inside idem's own")
    };
    // Inside a string a backslash escapes or not as the server's sql_mode
    // says (NO_BACKSLASH_ESCAPES): refused anywhere, so that idem and the
    // server read the same tokens.
    if sql.contains('\\') {
        return refuse("a backslash");
    }
    let chars: Vec<char> = sql.chars().collect();
    let (mut i, mut depth) = (0usize, 0usize);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\'' | '"' | '`' => i = closing(&chars, i).map_or_else(|| refuse_open(c), Ok)?,
            '#' => return refuse("a comment (#)"),
            '-' if next == Some('-') => return refuse("a comment (--)"),
            '/' if next == Some('*') => return refuse("a comment (/* */)"),
            ';' => return refuse("a second statement (;)"),
            '(' => depth += 1,
            ')' if depth == 0 => return refuse("a ) that closes more than it opened"),
            ')' => depth -= 1,
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i + 1)
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                {
                    i += 1;
                }
                let word: String = chars[start..=i].iter().collect::<String>().to_lowercase();
                if FORBIDDEN_WORDS.contains(&word.as_str()) {
                    return refuse(&format!("the word {}", word.to_uppercase()));
                }
            }
            _ => {}
        }
        i += 1;
    }
    if depth > 0 {
        return refuse("a ( left open");
    }
    Ok(())
}

/// Where the quote opened at `open` closes (a doubled quote stays inside).
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let quote = chars[open];
    let mut i = open + 1;
    while i < chars.len() {
        if chars[i] == quote {
            if chars.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

fn refuse_open(quote: char) -> Result<usize> {
    bail!(
        "--count-sql may not hold a {quote} left open: a count is one plain query, run inside idem's own"
    )
}

/// An error's causes in one line, each said once, with any remembered
/// password removed.
fn said(err: &anyhow::Error) -> String {
    scrub(&crate::controls::causes_once(err))
}

#[cfg(test)]
mod tests {
    use super::check_form;

    #[test]
    fn a_plain_count_passes() {
        for sql in [
            "SELECT count(*) FROM effects",
            "SELECT count(*) FROM `into` WHERE note = 'INTO OUTFILE ''x'' # -- ;'",
            "SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)",
            "SELECT count(*) FROM t WHERE x = \"a\"\"b\"",
            "SELECT 1-1",
        ] {
            check_form(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }

    #[test]
    fn what_could_end_the_wrapper_or_touch_a_file_is_refused() {
        for (sql, said) in [
            (
                "SELECT count(*) FROM payments) AS t INTO DUMPFILE '/tmp/x' #",
                ")",
            ),
            ("SELECT count(*) FROM t INTO OUTFILE '/tmp/x'", "INTO"),
            ("SELECT count(*) FROM t # note", "(#)"),
            ("SELECT count(*) FROM t -- note", "(--)"),
            ("SELECT count(*) FROM t /*! INTO OUTFILE '/x' */", "(/* */)"),
            ("SELECT count(*) FROM t; DELETE FROM t", ";"),
            ("SELECT (count(*) FROM t", "( left open"),
            ("SELECT 'a\\' INTO OUTFILE '/x' -- '", "backslash"),
            ("SELECT 'open", "' left open"),
            ("SELECT length(LOAD_FILE('/etc/passwd'))", "LOAD_FILE"),
            ("SELECT count(*) FROM t INTO @x", "INTO"),
        ] {
            let err = check_form(sql).expect_err(sql).to_string();
            assert!(err.contains(said), "{sql}: {err}");
            assert_eq!(err.lines().count(), 1);
        }
    }
}
