//! What `idem serve` prints: where it listens, then one line per award it handled.

use std::net::SocketAddr;

use serde::Serialize;

use super::race::outcome_cell;
use super::style::{dim, strong};
use crate::http::app::Handled;
use crate::race::RaceSettings;
use crate::strategy::StrategyKind;

/// The ready line: `--json` prints it as one object.
#[derive(Debug, Serialize)]
pub struct Ready {
    /// The app's base URL.
    pub url: String,
    /// Where to POST an award.
    pub endpoint: String,
    /// The engine the app's awards are decided on.
    pub engine: crate::race::engine::Engine,
    /// The database schema holding the app's tables (on MariaDB, the
    /// run's database).
    pub schema: String,
    /// The database, reachable by another program (its password hidden).
    pub database_url: String,
    /// A query counting the app's effects, for `idem probe --count-sql`:
    /// its committed XP rows.
    pub count_sql: String,
    /// A query counting the award service's calls: the times the work
    /// ran, committed or rolled back.
    pub calls_sql: String,
    pub strategy: StrategyKind,
    /// The guard file the app runs in the strategy's place, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy_file: Option<String>,
    pub pool_size: usize,
    pub runner_holds_connection: bool,
    pub threads: usize,
    pub work_ms: u64,
    pub fingerprint: bool,
    /// How many connections the app takes at once.
    pub max_connections: usize,
    /// How many processes of the app answer behind the URL, in turn.
    pub replicas: usize,
    /// How the app's pool reaches PostgreSQL: `direct` or `pgbouncer`.
    pub via: crate::db::via::Via,
    /// With `--standby`: the hot standby beside the app.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<ServedStandby>,
}

/// The hot standby beside `idem serve`'s app.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServedStandby {
    /// Where the app's finds read.
    pub read_from: crate::race::ReadFrom,
    /// How late the standby applies commits (`--replica-delay-ms`).
    pub apply_delay_ms: u64,
}

impl Ready {
    pub fn new(
        scheme: &str,
        addr: SocketAddr,
        schema: &str,
        database_url: String,
        s: &RaceSettings,
        max_connections: usize,
    ) -> Self {
        Self {
            url: format!("{scheme}://{addr}"),
            endpoint: format!("{scheme}://{addr}/lessons/1/complete"),
            engine: crate::race::engine::Engine::Postgres,
            schema: schema.to_owned(),
            database_url,
            count_sql: format!("SELECT count(*) FROM {schema}.experience_points"),
            calls_sql: format!("SELECT count(*) FROM {schema}.award_calls"),
            strategy: s.strategy(),
            strategy_file: s.app().guard_file.map(|f| f.name.clone()),
            pool_size: s.app().pool.size(),
            runner_holds_connection: s.app().pool.runner_holds_connection(),
            threads: s.app().threads,
            work_ms: s.work_ms(),
            replicas: s.app().replicas,
            via: s.app().pool.via(),
            fingerprint: s.app().fingerprint,
            max_connections,
            standby: s.app().standby.map(|p| ServedStandby {
                read_from: s.app().read_from,
                apply_delay_ms: p.apply_delay.as_millis() as u64,
            }),
        }
    }
}

impl Ready {
    /// The same for an app whose awards are decided on MariaDB, in the
    /// run's `database` there, reached at `database_url`: its effects are
    /// counted in its tables, its service's calls by `GET /counts` (they
    /// are counted in the app, not in a table).
    pub fn on_mariadb(
        scheme: &str,
        addr: SocketAddr,
        (database, database_url): (&str, String),
        s: &RaceSettings,
        max_connections: usize,
    ) -> Self {
        Self {
            engine: crate::race::engine::Engine::Mariadb,
            count_sql: "SELECT count(*) FROM experience_points".into(),
            calls_sql: String::new(),
            ..Self::new(scheme, addr, database, database_url, s, max_connections)
        }
    }
}

/// With a standby: where the finds read, on a line of its own.
fn standby_line(r: &Ready) -> String {
    let Some(ServedStandby {
        read_from,
        apply_delay_ms: delay,
    }) = r.standby
    else {
        return String::new();
    };
    let reads = match read_from {
        crate::race::ReadFrom::Standby => "finds read from a hot standby",
        crate::race::ReadFrom::Primary => "a hot standby beside it",
    };
    let delay = match delay {
        0 => String::new(),
        ms => format!(", applying {ms} ms late"),
    };
    format!("\n{}", dim(format!("{reads}{delay}")))
}

/// The ready line and how to call the app, for people.
pub fn render_ready(r: &Ready) -> String {
    let pool = super::race::pool(r.pool_size, r.runner_holds_connection);
    let award = r#"-d '{"user_id": 42, "amount": 10}'"#;
    // Over HTTPS both clients need the CA that signed the certificate.
    let ca = match r.url.starts_with("https:") {
        true => " --cacert CA.pem",
        false => "",
    };
    let calls = format!(
        "call it:\n  curl{ca} -i -X POST {} \\\n    -H 'Idempotency-Key: \"k1\"' {award}\n  curl{ca} {}/counts\n\
         race it:\n  idem probe {}{ca} \\\n    {award} \\\n    --count-sql '{}' \\\n    --count-database-url \\\n    '{}'\n\
         {}",
        r.endpoint,
        r.url,
        r.endpoint,
        r.count_sql,
        r.database_url,
        calls_and_plan(r)
    );
    format!(
        "{} {} on {}\n{}\n{}\n\n{}\n\n",
        strong("idem serve ·"),
        strong(crate::strategy::guard_file::label(
            r.strategy,
            r.strategy_file.as_deref()
        )),
        strong(&r.url),
        dim(format!(
            "tables in {} {} · {}{pool}{} · {} threads · work {} ms",
            match r.engine {
                crate::race::engine::Engine::Postgres => "schema",
                crate::race::engine::Engine::Mariadb => "MariaDB database",
            },
            r.schema,
            match r.replicas {
                1 => String::new(),
                n => format!("{n} app processes, each with a "),
            },
            match r.via {
                crate::db::via::Via::Direct => "",
                crate::db::via::Via::Pgbouncer => " through PgBouncer (transaction mode)",
            },
            r.threads,
            r.work_ms
        ))
        .to_string()
            + &standby_line(r),
        dim(format!(
            "up to {} connections at once{} · Ctrl-C stops it and drops its tables",
            r.max_connections,
            match r.replicas {
                1 => "",
                _ =>
                    " · the processes log no requests; each answer names its process (Idem-Replica)",
            }
        )),
        dim(calls),
    )
}

/// How to count the service's calls, and a plan for CI, where there is one.
fn calls_and_plan(r: &Ready) -> String {
    match r.engine {
        crate::race::engine::Engine::Postgres => format!(
            "count the service's calls instead (the work that ran, even if rolled back):\n    \
             --count-sql '{}'\n\
             probe it from a plan (for CI): --write-plan FILE writes one, then\n  idem probe \
             --plan FILE",
            r.calls_sql
        ),
        crate::race::engine::Engine::Mariadb => format!(
            "the service's calls (the work that ran, even if rolled back) are counted in the \
             app:\n  curl{} {}/counts",
            match r.url.starts_with("https:") {
                true => " --cacert CA.pem",
                false => "",
            },
            r.url
        ),
    }
}

/// One handled award, for the request log.
#[derive(Debug)]
pub struct Served {
    worker: usize,
    key: String,
    cell: String,
    did: String,
    ms: f64,
}

impl From<&Handled> for Served {
    fn from(h: &Handled) -> Self {
        Self {
            worker: h.request.worker,
            key: h.request.key.clone(),
            cell: outcome_cell(h.answer.outcome, h.status),
            did: h.answer.did.clone(),
            ms: h.arrived.elapsed().as_secs_f64() * 1000.0,
        }
    }
}

/// `#3 "k1" 201 created · made XP #2, stored key · 21.4 ms`
pub fn render_served(s: &Served) -> String {
    format!(
        "#{:<4} {:<20} {} {} {}\n",
        s.worker,
        format!("{:?}", s.key),
        s.cell,
        dim("·"),
        dim(format!("{} · {:.1} ms", s.did, s.ms)),
    )
}

/// A plan for `idem probe --plan` that probes this app: its award
/// endpoint, counted in its own tables, with the draft's cases.
pub fn probe_plan(r: &Ready) -> String {
    #[derive(serde::Serialize)]
    struct Endpoint<'a> {
        name: String,
        url: &'a str,
        data: &'a str,
        count_sql: &'a str,
        count_database_url: &'a str,
        conformance: bool,
    }
    #[derive(serde::Serialize)]
    struct Plan<'a> {
        endpoint: [Endpoint<'a>; 1],
    }
    let plan = Plan {
        endpoint: [Endpoint {
            name: format!(
                "award XP ({})",
                crate::strategy::guard_file::label(r.strategy, r.strategy_file.as_deref())
            ),
            url: &r.endpoint,
            data: r#"{"user_id": 42, "amount": 10}"#,
            count_sql: &r.count_sql,
            count_database_url: &r.database_url,
            conformance: true,
        }],
    };
    let toml = toml::to_string(&plan).unwrap_or_default();
    format!("# A plan for idem probe --plan, written by idem serve for itself.\n\n{toml}")
}
