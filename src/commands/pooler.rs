//! `idem pooler`: a real PgBouncer in transaction mode in front of the disposable cluster, and what it does to a session's state.

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs};
use crate::cli::teaching::PoolerArgs;
use crate::db::{Backend, ConnectOptions, Database, pgbouncer};
use crate::limits;
use crate::report::{self, Output};

pub struct Plan {
    /// The database it runs against.
    pub db: ConnectOptions,
    program: PathBuf,
    runs: u64,
    out: Output,
}

/// Finds PgBouncer before any cluster starts.
pub fn plan(args: &PoolerArgs) -> Result<Plan> {
    Ok(Plan {
        db: ConnectOptions {
            cluster: args.cluster.options(),
            ..ConnectOptions::default()
        },
        program: pgbouncer::locate(args.cluster.pgbouncer_bin.as_deref())?,
        runs: args.runs.unwrap_or(limits::POOLER_RUNS.default()),
        out: Output::from_json_flag(args.json),
    })
}

impl Command for Plan {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone())
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        let plan = self;
        let Backend::Embedded(cluster) = &db.backend else {
            bail!("idem pooler starts PgBouncer in front of its own disposable cluster");
        };
        let found = crate::pooler::run(&plan.program, cluster, plan.runs, None).await?;
        plan.out.record(&found, report::pooler::render)
    }
}
