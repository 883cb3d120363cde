//! Whether a URL reaches PostgreSQL through a pooler: PgBouncer's console, and two connections that share a server process.
//!
//! Both looks leave the server and the pooler as they were: one connection
//! to PgBouncer's console database (`pgbouncer`) asks `SHOW VERSION` and,
//! where the user may see it, the pool mode; two ordinary connections each
//! ask `SELECT pg_backend_pid()`. PostgreSQL itself has no `pgbouncer`
//! database (it answers 3D000) and never gives two live connections one
//! process; a pooler in transaction or statement mode does, whenever the
//! second client is lent the server connection the first just gave back.

use std::time::Duration;

use serde::Serialize;
use tokio_postgres::SimpleQueryMessage;

use super::pool::Connect;

/// How long each look may take.
const LOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// What stands between idem and PostgreSQL, as far as idem can tell.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Pooled {
    /// `PgBouncer 1.18.0`, when its console said so.
    pub pgbouncer: Option<String>,
    /// PgBouncer's console exists but would not answer this user
    /// (`not allowed`: not one of its `admin_users` or `stats_users`).
    pub console_refused: bool,
    /// The pool mode the console gave for the URL's database.
    pub pool_mode: Option<String>,
    /// Two live connections of idem's were served by one server process.
    pub shared_process: Option<i32>,
}

impl Pooled {
    /// Whether a pooler is in the way, by either look.
    pub fn seen(&self) -> bool {
        self.pgbouncer.is_some() || self.console_refused || self.shared_process.is_some()
    }

    /// Whether a connection may be lent another server process between
    /// transactions: a pooler in transaction or statement mode, or one whose
    /// mode idem could not read.
    pub fn lends_between_transactions(&self) -> bool {
        match self.pool_mode.as_deref() {
            Some("session") => self.shared_process.is_some(),
            Some(_) => true,
            None => self.seen(),
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        let who = match (&self.pgbouncer, self.console_refused) {
            (Some(version), _) => version.clone(),
            (None, true) => "PgBouncer (its console refused this user)".into(),
            (None, false) if self.shared_process.is_some() => "a pooler".into(),
            (None, false) => return "none seen".into(),
        };
        let mut said = who;
        if let Some(mode) = &self.pool_mode {
            said.push_str(&format!(", pool_mode = {mode}"));
        }
        if let Some(pid) = self.shared_process {
            said.push_str(&format!(
                "; two connections were served by one server process ({pid}): \
                 transaction pooling"
            ));
        }
        said
    }
}

/// Looks for a pooler behind `connect`'s settings.
pub async fn look(connect: &Connect) -> Pooled {
    let mut pooled = Pooled::default();
    let mut console = connect.config.clone();
    console.dbname("pgbouncer");
    match tokio::time::timeout(LOOK_TIMEOUT, console.connect(connect.tls.clone())).await {
        Ok(Ok((client, connection))) => {
            let running = tokio::spawn(connection);
            pooled.pgbouncer = first_value(&client, "SHOW VERSION", |_| true, 0)
                .await
                .map(|v| v.trim().to_string());
            let database = connect
                .config
                .get_dbname()
                .unwrap_or("postgres")
                .to_string();
            pooled.pool_mode = pool_mode(&client, &database).await;
            drop(client);
            let _ = running.await;
        }
        Ok(Err(err)) => {
            let said = err
                .as_db_error()
                .map(|db| db.message().to_string())
                .unwrap_or_default();
            pooled.console_refused = said.contains("not allowed");
        }
        Err(_) => {}
    }
    // The whole look, its queries too, within one bound: a pooler that
    // stalls mid-answer says nothing rather than holding doctor up.
    pooled.shared_process = tokio::time::timeout(LOOK_TIMEOUT, shared_process(connect))
        .await
        .ok()
        .flatten();
    pooled
}

/// The pool mode PgBouncer's console gives `database`: its own, else the
/// default from `SHOW CONFIG`.
async fn pool_mode(client: &tokio_postgres::Client, database: &str) -> Option<String> {
    let rows = client.simple_query("SHOW DATABASES").await.ok()?;
    let own = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) if row.get("name") == Some(database) => {
            row.get("pool_mode").map(str::to_string)
        }
        _ => None,
    });
    match own.filter(|m| !m.is_empty()) {
        Some(mode) => Some(mode),
        None => first_value(client, "SHOW CONFIG", |r| r.get(0) == Some("pool_mode"), 1).await,
    }
}

/// Column `column` of the first row of `sql` that `wanted` keeps.
async fn first_value(
    client: &tokio_postgres::Client,
    sql: &str,
    wanted: impl Fn(&tokio_postgres::SimpleQueryRow) -> bool,
    column: usize,
) -> Option<String> {
    let rows = client.simple_query(sql).await.ok()?;
    rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) if wanted(row) => row.get(column).map(str::to_string),
        _ => None,
    })
}

/// Two connections at once, each asking its server process: the same one
/// for both only behind a pooler.
async fn shared_process(connect: &Connect) -> Option<i32> {
    let open = || async {
        let (client, connection) =
            tokio::time::timeout(LOOK_TIMEOUT, connect.config.connect(connect.tls.clone()))
                .await
                .ok()?
                .ok()?;
        tokio::spawn(connection);
        Some(client)
    };
    let (a, b) = (open().await?, open().await?);
    let pid = async |c: &tokio_postgres::Client| {
        let row = c
            .query_typed_one("SELECT pg_backend_pid()", &[])
            .await
            .ok()?;
        Some(row.get::<_, i32>(0))
    };
    // Both stay open: a session pooler keeps the first one's process for
    // it, so only a pooler that lends between transactions gives it to b.
    // A pooler with more than one idle server connection may lend b
    // another one any time: a few turns each, and one process seen by
    // both is enough.
    let (mut seen_by_a, mut seen_by_b) = (Vec::new(), Vec::new());
    for _ in 0..SHARING_TURNS {
        seen_by_a.push(pid(&a).await?);
        seen_by_b.push(pid(&b).await?);
        if let Some(shared) = seen_by_b.iter().find(|p| seen_by_a.contains(p)) {
            return Some(*shared);
        }
    }
    None
}

/// How many times each of the two connections asks for its process.
const SHARING_TURNS: usize = 4;
