//! More than one primary (`--nodes`, `--spread`): a MariaDB race on a Galera cluster idem starts, and how a burst's requests reach its nodes.

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits;

/// The cluster a MariaDB race runs on, and how its requests reach it.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterInput {
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::NODES.parser(),
          help = limits::NODES.help(
              "With --engine mariadb: race on a Galera cluster of N MariaDB nodes that idem \
               starts on loopback, every node a primary that takes writes (3 is the course's \
               cluster)."))]
    pub nodes: Option<u64>,

    /// With --nodes: how a burst's requests reach the nodes, all to node 1,
    /// or each to the next node in turn, as a load balancer in front of a
    /// cluster hands them out [default: round-robin].
    #[arg(long, value_enum, value_name = "HOW")]
    pub spread: Option<Spread>,

    /// With --nodes: each client sends its request once more as soon as the
    /// burst is answered (its answer lost on the way, say), to the node the
    /// spread gives its retry: with round-robin, the next one.
    #[arg(long)]
    pub retry_at_once: bool,

    /// With --retry-at-once: the node a retry reaches, the next one the
    /// spread gives (other) or the one its first request reached (same)
    /// [default: other].
    #[arg(long, value_enum, value_name = "WHICH")]
    pub retry_node: Option<RetryNode>,

    /// With --nodes: the requests read causally (`wsrep_sync_wait = 1`): a
    /// read waits until its node has applied every write the cluster
    /// certified before it.
    #[arg(long)]
    pub sync_wait: bool,

    /// With --retry-at-once and one client: the node its retry lands on
    /// is held behind from the start (its applier paused by `BACKUP STAGE
    /// BLOCK_COMMIT`) until the retry has answered or one of its statements
    /// has waited there half a second, so the retry certainly reads before
    /// that node applied the first request. Without it, whether the retry
    /// reads too early is a race against the node's applier.
    #[arg(long)]
    pub retry_behind: bool,

    /// With --nodes: kill node N's server (SIGKILL) halfway through the
    /// work, as a machine lost in the middle of a burst; N from 2 (node 1
    /// keeps the run's bookkeeping). One race only.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::KILL_NODE.parser())]
    pub kill_node: Option<u64>,
}

/// How a burst's requests reach a cluster's nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// Every request to node 1.
    OneNode,
    /// Request N to node ((N - 1) mod nodes) + 1.
    #[default]
    RoundRobin,
}

/// The node a client's retry reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RetryNode {
    /// The next node the spread gives, as a balancer hands out a new
    /// connection.
    #[default]
    Other,
    /// The node the first request reached, as a client that keeps its
    /// connection does.
    Same,
}

impl ClusterInput {
    /// Whether anything here was said.
    pub fn said(&self) -> bool {
        self.nodes.is_some()
            || self.spread.is_some()
            || self.retry_at_once
            || self.retry_node.is_some()
            || self.sync_wait
            || self.retry_behind
            || self.kill_node.is_some()
    }
}
