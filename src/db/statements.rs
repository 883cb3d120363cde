//! The statements the workers send: written with their parameters' types, sent unnamed, and naming the run's tables by schema.
//!
//! Three things a pooler in transaction mode (PgBouncer) hands a client's
//! statements to whichever server connection is free, so a worker's
//! statement must stand on its own on any of them:
//!
//! - It names its tables with the run's schema (`"idem_1a2b3c4d".idempotency_keys`)
//!   instead of counting on a `search_path` set for the session, which
//!   another client's server connection does not have (and which PgBouncer
//!   refuses to set at start-up).
//! - It goes out unnamed, parsed, bound and run in one round trip
//!   (tokio-postgres's `query_typed`), instead of prepared once by name on
//!   one server connection and run later on another (`prepared statement
//!   "s0" does not exist`). Only where nothing can stand in between (idem's
//!   own cluster, on its socket) does a connection prepare by name, which
//!   spares the server a parse per statement ([`Sending`]).
//! - So its parameters' types are written beside it, since nothing may
//!   have prepared them.
//!
//! The course's statements are written as the course writes them, with
//! bare table names; [`Schema`] qualifies each one once per run.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row, Statement};

/// A statement as the course writes it: bare table names, and the types of
/// its parameters in order.
#[derive(Debug)]
pub struct Sql {
    pub text: &'static str,
    pub(crate) types: &'static [Type],
}

impl Sql {
    pub const fn new(text: &'static str, types: &'static [Type]) -> Self {
        Self { text, types }
    }
}

/// The tables idem's migrations make, as the statements name them.
const TABLES: [&str; 4] = [
    "idempotency_keys",
    "experience_points",
    "cache_entries",
    "award_calls",
];

/// The run's schema, and each statement written for it, made once.
#[derive(Debug)]
pub struct Schema {
    name: String,
    /// By the text's address and length: each statement is a `'static`
    /// text, so that names it.
    written: Mutex<HashMap<(usize, usize), Arc<str>>>,
}

impl Schema {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// `text` with its tables named in this schema (made on first use).
    pub fn qualify(&self, text: &'static str) -> Arc<str> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written
            .entry((text.as_ptr() as usize, text.len()))
            .or_insert_with(|| qualified(text, &self.name).into())
            .clone()
    }
}

/// `text` with every bare name of idem's tables prefixed with `schema`.
/// A name counts when it stands alone: not part of a longer identifier
/// (`idempotency_keys_id_seq`, the column `idempotency_key`), not already
/// qualified, not inside quotes.
pub fn qualified(text: &str, schema: &str) -> String {
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 3 * (schema.len() + 3));
    let mut quoted: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quoted {
            if c == q {
                quoted = None;
            }
        } else if c == b'\'' || c == b'"' {
            quoted = Some(c);
        } else if i == 0 || (!is_ident(bytes[i - 1]) && bytes[i - 1] != b'.') {
            let table = TABLES.iter().find(|t| {
                text[i..].starts_with(**t) && bytes.get(i + t.len()).is_none_or(|&n| !is_ident(n))
            });
            if let Some(table) = table {
                out.push('"');
                out.push_str(schema);
                out.push_str("\".");
                out.push_str(table);
                i += table.len();
                continue;
            }
        }
        let len = text[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&text[i..i + len]);
        i += len;
    }
    out
}

/// A statement's text as one client sends it.
pub enum Text {
    /// As written: the tables are on the client's search path.
    Bare(&'static str),
    /// Written for the run's schema.
    Qualified(Arc<str>),
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Bare(text) => text,
            Text::Qualified(text) => text,
        }
    }
}

/// How a connection sends its statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sending {
    /// Prepared by name once per connection and reused (deadpool's
    /// statement cache): the server parses and plans each statement once.
    /// Only where idem knows nothing stands between it and the server: its
    /// own disposable cluster, reached on its socket.
    Prepared,
    /// Unnamed, parsed, bound and run in one round trip each time: what a
    /// pooler in transaction mode passes. Everywhere else, since behind a
    /// URL a pooler may stand unseen.
    Unnamed,
}

/// A connection that sends [`Sql`]: the client, how it names the tables,
/// and the calls. (Named apart from tokio-postgres's own `query_opt` and
/// the like, which take a statement or a text without its types.)
pub trait Sends: Send + Sync {
    /// The client underneath, for what is not a [`Sql`] (BEGIN, COMMIT).
    fn client(&self) -> &Client;

    /// `sql`'s text as this connection sends it.
    fn text(&self, sql: &'static Sql) -> Text;

    /// The statement cache of a connection that prepares by name
    /// ([`Sending::Prepared`]); `None` sends every statement unnamed.
    fn cache(&self) -> Option<&deadpool_postgres::ClientWrapper> {
        None
    }

    /// `sql` prepared by name on this connection, if it prepares.
    fn prepared(
        &self,
        sql: &'static Sql,
    ) -> impl Future<Output = Result<Option<Statement>, Error>> + Send {
        async move {
            match self.cache() {
                Some(cache) => {
                    let text = self.text(sql);
                    Ok(Some(cache.prepare_typed_cached(&text, sql.types).await?))
                }
                None => Ok(None),
            }
        }
    }

    /// Every row the statement returns.
    fn fetch_all(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send {
        async move {
            match self.prepared(sql).await? {
                Some(statement) => self.client().query(&statement, params).await,
                None => {
                    let text = self.text(sql);
                    self.client().query_typed(&text, &typed(sql, params)).await
                }
            }
        }
    }

    /// The one row the statement returns, if any.
    fn fetch_opt(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Option<Row>, Error>> + Send {
        async move {
            match self.prepared(sql).await? {
                Some(statement) => self.client().query_opt(&statement, params).await,
                None => {
                    let text = self.text(sql);
                    let typed = typed(sql, params);
                    self.client().query_typed_opt(&text, &typed).await
                }
            }
        }
    }

    /// The one row the statement returns: an error if there is none.
    fn fetch_one(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, Error>> + Send {
        async move {
            match self.prepared(sql).await? {
                Some(statement) => self.client().query_one(&statement, params).await,
                None => {
                    let text = self.text(sql);
                    let typed = typed(sql, params);
                    self.client().query_typed_one(&text, &typed).await
                }
            }
        }
    }

    /// Runs the statement; how many rows it touched.
    fn exec(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<u64, Error>> + Send {
        async move {
            match self.prepared(sql).await? {
                Some(statement) => self.client().execute(&statement, params).await,
                None => {
                    let text = self.text(sql);
                    let typed = typed(sql, params);
                    self.client().execute_typed(&text, &typed).await
                }
            }
        }
    }
}

/// Each parameter beside its type, as `query_typed` takes them.
fn typed<'a>(sql: &Sql, params: &[&'a (dyn ToSql + Sync)]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    debug_assert_eq!(params.len(), sql.types.len(), "{}", sql.text);
    params
        .iter()
        .copied()
        .zip(sql.types.iter().cloned())
        .collect()
}

/// A plain client: the tables are on its search path.
impl Sends for Client {
    fn client(&self) -> &Client {
        self
    }
    fn text(&self, sql: &'static Sql) -> Text {
        Text::Bare(sql.text)
    }
}

/// A deadpool-postgres client: the tables are on its search path.
impl Sends for deadpool_postgres::ClientWrapper {
    fn client(&self) -> &Client {
        self
    }
    fn text(&self, sql: &'static Sql) -> Text {
        Text::Bare(sql.text)
    }
}

#[cfg(test)]
mod tests {
    use super::qualified;

    #[test]
    fn bare_table_names_are_qualified_and_nothing_else() {
        let sql = "INSERT INTO experience_points (idempotency_key) VALUES ($1)
             ON CONFLICT (idempotency_key) DO NOTHING; SELECT id FROM idempotency_keys
             JOIN x.cache_entries ON true WHERE 'idempotency_keys' <> \"cache_entries\"
             AND nextval('idempotency_keys_id_seq') > 0 AND idempotency_keys.id = 1";
        assert_eq!(
            qualified(sql, "idem_1a2b3c4d"),
            "INSERT INTO \"idem_1a2b3c4d\".experience_points (idempotency_key) VALUES ($1)
             ON CONFLICT (idempotency_key) DO NOTHING; SELECT id FROM \"idem_1a2b3c4d\".idempotency_keys
             JOIN x.cache_entries ON true WHERE 'idempotency_keys' <> \"cache_entries\"
             AND nextval('idempotency_keys_id_seq') > 0 AND \"idem_1a2b3c4d\".idempotency_keys.id = 1"
        );
    }

    #[test]
    fn a_name_at_either_end_counts() {
        assert_eq!(qualified("cache_entries", "s"), "\"s\".cache_entries");
        assert_eq!(qualified("cache_entriesx", "s"), "cache_entriesx");
    }
}
