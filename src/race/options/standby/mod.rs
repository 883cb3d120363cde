//! Lesson 10: a hot standby beside the race, what reads it, how commits wait for it, and the failover that promotes it.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits::{self, Origin, help_with_default as with_default};

const HEADING: &str = "Lesson 10: more than one database";

/// `--standby` and what it says of the standby.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StandbyInput {
    /// Start a hot standby of the disposable cluster (pg_basebackup and
    /// streaming replication) beside it for the race.
    #[arg(help_heading = HEADING)]
    #[arg(long)]
    pub standby: bool,

    #[arg(help_heading = HEADING)]
    #[arg(long, value_enum, value_name = "SERVER",
          help = with_default(
              "Where the strategy's finds read: the primary, or the standby (as an app \
               with a reading role does); writes go to the primary.",
              ReadFrom::Primary.name()))]
    pub read_from: Option<ReadFrom>,

    #[arg(help_heading = HEADING)]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::REPLICA_DELAY_MS.parser(),
          help = limits::REPLICA_DELAY_MS.help(
              "The standby's recovery_min_apply_delay: how long it waits before applying \
               a commit, so that its lag shows."))]
    pub replica_delay_ms: Option<u64>,

    #[arg(help_heading = HEADING)]
    #[arg(long, value_enum, value_name = "MODE",
          help = with_default(
              "How the app's commits wait for the standby: off (asynchronous replication, \
               PostgreSQL's default) or remote_apply (until the standby has applied them).",
              Synchronous::Off.name()))]
    pub synchronous: Option<Synchronous>,

    #[arg(help_heading = HEADING)]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::LINK_DELAY_MS.parser(),
          help = limits::LINK_DELAY_MS.help(
              "The standby's WAL crosses a relay of idem's that holds it this long, as a \
               link between two sites would; --failover cuts it."))]
    pub link_delay_ms: Option<u64>,

    /// A hot standby of the --database-url server, which idem only reads
    /// (with --read-from standby, the finds go there); never promoted,
    /// stopped or reconfigured.
    // Never from a file, which names no URL.
    #[arg(help_heading = HEADING)]
    #[arg(long, value_name = "URL", hide_env_values = true)]
    #[serde(skip)]
    pub standby_url: Option<String>,

    /// Promote the standby: once the race's requests are answered, cut the
    /// link between the servers (the WAL still on it is lost), promote the
    /// standby with pg_promote(), and send the completed request again to it.
    #[arg(help_heading = HEADING)]
    #[arg(long, value_enum, value_name = "WHEN")]
    pub failover: Option<Failover>,
}

/// The hot standby a race starts (`--standby`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandbyPlan {
    /// The user's standby (`--standby-url`), which idem only reads; else
    /// one idem starts.
    #[serde(default)]
    pub yours: bool,
    /// Its `recovery_min_apply_delay` (`--replica-delay-ms`).
    pub apply_delay: Duration,
    /// How long a commit waits for it (`--synchronous`).
    #[serde(default)]
    pub synchronous: Synchronous,
    /// The delay of the link its WAL crosses, if it crosses one
    /// (`--link-delay-ms`; `--failover` needs one to cut).
    #[serde(default)]
    pub link_delay: Option<Duration>,
    /// When the standby is promoted, if it is (`--failover`).
    #[serde(default)]
    pub failover: Option<Failover>,
}

/// How the app's commits wait for the standby (`--synchronous`): the
/// `synchronous_commit` of the workers' sessions, with the standby named
/// in the primary's `synchronous_standby_names` for `remote_apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Asynchronous replication, PostgreSQL's default: a commit waits for
    /// the primary alone (`synchronous_commit = local`).
    #[default]
    Off,
    /// A commit waits until the standby has applied it, so that a read
    /// there sees it (`synchronous_commit = remote_apply`).
    #[value(name = "remote_apply")]
    RemoteApply,
}

impl Synchronous {
    /// The workers' `synchronous_commit`.
    pub fn setting(self) -> &'static str {
        match self {
            Synchronous::Off => "local",
            Synchronous::RemoteApply => "remote_apply",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Synchronous::Off => "off",
            Synchronous::RemoteApply => "remote_apply",
        }
    }
}

/// When the standby is promoted (`--failover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Failover {
    /// Once the race's requests are answered: the link is cut, the standby
    /// promoted, and the completed request sent again to it.
    AfterComplete,
}

/// Where a strategy's finds read (`--read-from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// The primary, where the writes go.
    #[default]
    Primary,
    /// The hot standby: what it has replayed so far.
    Standby,
}

impl ReadFrom {
    pub fn name(self) -> &'static str {
        match self {
            ReadFrom::Primary => "primary",
            ReadFrom::Standby => "standby",
        }
    }
}

impl StandbyInput {
    /// Whether a standby is asked for: idem's, or the user's by URL.
    pub fn wanted(&self) -> bool {
        self.standby || self.standby_url.is_some()
    }

    /// Where the strategy's finds read.
    pub(super) fn read_from(&self) -> ReadFrom {
        self.read_from.unwrap_or_default()
    }

    /// Where the tables live, with the user's standby if one is named;
    /// refuses a standby idem would have to make of a user's server.
    pub fn connect(
        &self,
        connect: crate::db::ConnectOptions,
        database_url_given: bool,
    ) -> Result<crate::db::ConnectOptions> {
        if self.standby && database_url_given {
            bail!(
                "--standby starts a standby of idem's own disposable cluster; idem never \
                 promotes, stops or reconfigures your server: drop --database-url, or name \
                 your standby with --standby-url"
            );
        }
        Ok(crate::db::ConnectOptions {
            standby_url: self.standby_url.clone(),
            ..connect
        })
    }

    /// The standby the race starts, if any: `--replica-delay-ms` and
    /// `--read-from standby` need one.
    pub(super) fn resolve(&self, origin: Origin) -> Result<Option<StandbyPlan>> {
        if !self.wanted() {
            self.refuse_without_one(origin)?;
            return Ok(None);
        }
        if let Some(ms) = self.replica_delay_ms {
            limits::REPLICA_DELAY_MS.check(ms, origin)?;
        }
        let yours = self.standby_url.is_some();
        if yours {
            self.refuse_on_yours()?;
        }
        if let Some(ms) = self.link_delay_ms {
            limits::LINK_DELAY_MS.check(ms, origin)?;
        }
        // A failover cuts the link between the servers: it needs one.
        let link_delay = match (self.link_delay_ms, self.failover) {
            (Some(ms), _) => Some(ms),
            (None, Some(_)) => Some(limits::LINK_DELAY_MS.default()),
            (None, None) => None,
        };
        Ok(Some(StandbyPlan {
            yours,
            apply_delay: Duration::from_millis(self.replica_delay_ms.unwrap_or(0)),
            synchronous: self.synchronous.unwrap_or_default(),
            link_delay: link_delay.map(Duration::from_millis),
            failover: self.failover,
        }))
    }

    /// What says something of a standby, refused when there is none.
    fn refuse_without_one(&self, origin: Origin) -> Result<()> {
        let standby = origin.name("--standby", "race.standby = true");
        if self.replica_delay_ms.is_some() {
            bail!(
                "{} delays a standby; add {standby}",
                limits::REPLICA_DELAY_MS.name(origin)
            );
        }
        if self.read_from == Some(ReadFrom::Standby) {
            bail!(
                "{} reads from a standby; add {standby}",
                origin.name("--read-from standby", "race.read_from = \"standby\"")
            );
        }
        let needs_one = [
            (
                self.synchronous.is_some(),
                origin.name("--synchronous", "race.synchronous"),
            ),
            (
                self.link_delay_ms.is_some(),
                limits::LINK_DELAY_MS.name(origin),
            ),
            (
                self.failover.is_some(),
                origin.name("--failover", "race.failover"),
            ),
        ];
        if let Some((_, name)) = needs_one.into_iter().find(|(given, _)| *given) {
            bail!("{name} is about a standby; add {standby}");
        }
        Ok(())
    }

    /// What would change the user's standby, which idem only reads.
    fn refuse_on_yours(&self) -> Result<()> {
        let reconfigures = [
            (self.replica_delay_ms.is_some(), "--replica-delay-ms"),
            (self.link_delay_ms.is_some(), "--link-delay-ms"),
            (self.failover.is_some(), "--failover"),
            (
                self.synchronous == Some(Synchronous::RemoteApply),
                "--synchronous remote_apply",
            ),
        ];
        if let Some((_, name)) = reconfigures.into_iter().find(|(given, _)| *given) {
            bail!(
                "{name} needs a standby of idem's own; idem only reads your \
                 --standby-url and never promotes, stops or reconfigures your servers"
            );
        }
        Ok(())
    }
}

/// How long, past its apply delay and its link's, a standby may take to
/// replay the reset of the tables before a run.
pub(crate) const CATCH_UP_SLACK: Duration = Duration::from_secs(10);

/// How long a standby may take to replay what the primary wrote: its
/// apply delay, and its link's a few times over (a connection across the
/// link takes several trips to start streaming).
pub(crate) fn catch_up_limit(plan: StandbyPlan) -> Duration {
    plan.apply_delay + plan.link_delay.unwrap_or_default() * 10 + CATCH_UP_SLACK
}

/// `config` with a server setting for every session it opens.
pub(crate) fn with_setting(
    mut config: tokio_postgres::Config,
    name: &str,
    value: &str,
) -> tokio_postgres::Config {
    let options = match config.get_options() {
        Some(given) if !given.is_empty() => format!("{given} -c {name}={value}"),
        _ => format!("-c {name}={value}"),
    };
    config.options(&options);
    config
}
