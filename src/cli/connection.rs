//! Where the tables live: a disposable cluster, or a server named by URL.

use std::path::PathBuf;

use clap::Args;

use crate::db::{ClusterOptions, ConnectOptions};

/// Where the tables live.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Database")]
pub struct ConnectArgs {
    /// A PostgreSQL server to use instead of a disposable cluster. idem works
    /// in a schema of its own (idem_<run id>) and drops it at the end.
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Keep the run's schema on the server (with --database-url) and print its name.
    #[arg(long, global = true)]
    pub keep: bool,
}

/// How a disposable cluster is started: which binaries, as which user.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Directory holding PostgreSQL's `initdb` and `postgres` (found if not given).
    #[arg(
        long,
        global = true,
        env = "IDEM_PG_BIN",
        value_name = "DIR",
        hide_env_values = true
    )]
    pub pg_bin: Option<PathBuf>,

    /// The user the disposable cluster runs as when idem runs as root [default: postgres].
    #[arg(
        long,
        global = true,
        env = "IDEM_PG_USER",
        value_name = "NAME",
        hide_env_values = true
    )]
    pub pg_user: Option<String>,

    /// PgBouncer's program, or the directory holding it, for `--via pgbouncer`
    /// and `idem pooler` (found if not given).
    #[arg(
        long,
        global = true,
        env = "IDEM_PGBOUNCER_BIN",
        value_name = "PATH",
        hide_env_values = true
    )]
    pub pgbouncer_bin: Option<PathBuf>,

    /// Directory holding MariaDB's `mariadbd` and `mariadb-install-db`, for
    /// `--engine mariadb` (found if not given).
    #[arg(
        long,
        global = true,
        env = "IDEM_MARIADB_BIN",
        value_name = "DIR",
        hide_env_values = true
    )]
    pub mariadb_bin: Option<PathBuf>,
}

impl ClusterArgs {
    pub fn options(&self) -> ClusterOptions {
        ClusterOptions {
            pg_bin: self.pg_bin.clone(),
            pg_user: self.pg_user.clone(),
            pgbouncer_bin: self.pgbouncer_bin.clone(),
            mariadb_bin: self.mariadb_bin.clone(),
            ..ClusterOptions::default()
        }
    }
}

/// A schema an earlier run kept (`audit`, `reap`).
#[derive(Debug, Clone, Args)]
pub struct KeptSchemaArgs {
    /// A schema kept by an earlier run with --keep (needs --database-url).
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Option<String>,
}

impl KeptSchemaArgs {
    /// The options for working in the kept schema, if one is named; in a
    /// fresh run's schema otherwise.
    pub fn options(&self, connect: &ConnectArgs) -> ConnectOptions {
        ConnectOptions {
            schema: self.schema.clone(),
            ..connect.options()
        }
    }
}

impl ConnectArgs {
    /// Where a MariaDB race runs: a disposable server, or the server a
    /// `mysql://` or `mariadb://` URL names (a PostgreSQL URL is refused:
    /// it names the other engine's server).
    pub fn mariadb(&self) -> anyhow::Result<crate::db::mariadb::MariadbOptions> {
        use crate::db::mariadb::url::{MysqlUrl, is_mysql};
        let url = match &self.database_url {
            Some(url) if is_mysql(url) => Some(MysqlUrl::parse(url, "--database-url")?),
            Some(url) => anyhow::bail!(
                "--engine mariadb needs a mysql:// or mariadb:// URL; {} is not one (unset \
                 DATABASE_URL or --database-url to race on a MariaDB of idem's own)",
                crate::db::secret::redact(url)
            ),
            None => None,
        };
        Ok(crate::db::mariadb::MariadbOptions {
            bin: self.cluster.mariadb_bin.clone(),
            template_cache: None,
            url,
            keep: self.keep,
            nodes: 1,
        })
    }

    /// The same for a race on `nodes` (more than one: a Galera cluster of
    /// idem's own).
    pub fn mariadb_for(&self, nodes: usize) -> anyhow::Result<crate::db::mariadb::MariadbOptions> {
        Ok(crate::db::mariadb::MariadbOptions {
            nodes,
            ..self.mariadb()?
        })
    }

    /// The options for working in `schema`, an existing run's.
    pub fn options_in(&self, schema: &str) -> ConnectOptions {
        ConnectOptions {
            schema: Some(schema.to_string()),
            ..self.options()
        }
    }

    pub fn options(&self) -> ConnectOptions {
        ConnectOptions {
            database_url: self.database_url.clone(),
            cluster: self.cluster.options(),
            keep: self.keep,
            schema: None,
            standby_url: None,
        }
    }
}

impl ConnectArgs {
    /// Where the tables live, with the user's standby if one is named;
    /// refuses a standby idem would have to make of a user's server.
    pub fn with_standby(
        &self,
        standby: &crate::race::options::StandbyInput,
    ) -> anyhow::Result<ConnectOptions> {
        standby.connect(self.options(), self.database_url.is_some())
    }
}
