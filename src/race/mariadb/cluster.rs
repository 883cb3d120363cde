//! A MariaDB race on a Galera cluster (`--nodes`): which node each request reaches, and the cluster's own counters of what certification refused.
//!
//! Every node of a Galera cluster takes writes. A transaction runs on its
//! own node, and is certified against the other nodes' writes only at its
//! COMMIT: a conflict found there rolls it back (1213, "Deadlock: wsrep
//! aborted transaction"), after whatever the request did before it. The
//! counters here are the cluster's own record of that, read on every node
//! before and after the race.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::race::options::{RaceInput, RetryNode, Spread};

/// The cluster a race runs on, and how its requests reach the nodes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cluster {
    /// Nodes in the cluster; 1 is a plain server.
    pub nodes: usize,
    /// How the burst's requests reach them.
    pub spread: Spread,
    /// Each client sends its request again as soon as the burst is answered.
    pub retry_at_once: bool,
    /// The node such a retry reaches: the spread's next, or its first's.
    pub retry_node: RetryNode,
    /// The burst's requests, numbered 1 to this; a request numbered past
    /// them is a client's retry (see [`Cluster::node_of`]). The race's
    /// `workers` says it already.
    #[serde(skip)]
    pub requests: usize,
    /// The requests read causally (`wsrep_sync_wait = 1`).
    pub sync_wait: bool,
    /// `--retry-behind`: node 2, where the one client's retry lands, held
    /// behind from the start until the retry answered or waited.
    pub retry_behind: bool,
    /// `--kill-node`: the node (1-based) killed halfway through the work.
    pub kill_node: Option<usize>,
}

impl Cluster {
    /// The cluster `input` asks for, refusing what a race on more than
    /// one node does not take yet.
    pub fn of(input: &RaceInput) -> Result<Self> {
        let nodes = input.cluster.nodes.unwrap_or(1) as usize;
        let c = &input.cluster;
        if nodes == 1 && c.said() {
            bail!(
                "--spread, --retry-at-once, --sync-wait, --retry-behind and --kill-node are a \
                 cluster's: add --nodes 3"
            );
        }
        let kill_node = c.kill_node.map(|n| n as usize);
        if let Some(n) = kill_node
            && !(2..=nodes).contains(&n)
        {
            bail!(
                "--kill-node takes a node from 2 to {nodes} (node 1 keeps the run's bookkeeping), not {n}"
            );
        }
        let one_client = input.shape.workers == Some(1) && c.spread != Some(Spread::OneNode);
        if c.retry_behind && !(c.retry_at_once && one_client) {
            bail!(
                "--retry-behind holds the node one client's retry lands on: add --retry-at-once \
                 and --workers 1 (and leave --spread round-robin)"
            );
        }
        if c.retry_node.is_some() && !c.retry_at_once {
            bail!("--retry-node says where a retry goes: add --retry-at-once");
        }
        if c.retry_node == Some(RetryNode::Same) && c.retry_behind {
            bail!(
                "--retry-behind holds the node the retry moves to; with --retry-node same it \
                 stays on its first node"
            );
        }
        if nodes > 1 && input.faults.crash.is_some() {
            bail!("a race on a Galera cluster (--nodes) does not take --crash yet");
        }
        Ok(Cluster {
            nodes,
            spread: c.spread.unwrap_or_default(),
            retry_at_once: c.retry_at_once,
            retry_node: c.retry_node.unwrap_or_default(),
            requests: 0,
            sync_wait: c.sync_wait,
            retry_behind: c.retry_behind,
            kill_node,
        })
    }

    /// A stepped race (`idem step`, `idem explore`) on this cluster: each
    /// request on a node of its own, round-robin, so that no two wait on
    /// one node's locks (which idem reads on node 1 only), and no retry,
    /// kill or causal read, which the walk does not branch on.
    pub fn stepped(self, workers: usize) -> Result<()> {
        if !self.is_cluster() {
            return Ok(());
        }
        if self.spread != Spread::RoundRobin || workers > self.nodes {
            bail!(
                "idem step and idem explore walk a cluster with each request on a node of its \
                 own: --spread round-robin and at most {} workers",
                self.nodes
            );
        }
        if self.retry_at_once || self.sync_wait || self.retry_behind || self.kill_node.is_some() {
            bail!(
                "idem step and idem explore walk a cluster without --retry-at-once, --sync-wait or --kill-node"
            );
        }
        Ok(())
    }

    /// Whether this is a cluster at all.
    pub fn is_cluster(self) -> bool {
        self.nodes > 1
    }

    /// The same cluster, its burst `requests` long: a request numbered
    /// past them is a retry.
    pub fn with_requests(self, requests: usize) -> Self {
        Self { requests, ..self }
    }

    /// The node (0-based) worker `worker` (1-based) sends its request to; a
    /// client's retry (`--retry-at-once`, numbered past the burst) with
    /// `--retry-node same`, to its first request's.
    pub fn node_of(self, worker: usize) -> usize {
        let same = self.retry_at_once && self.retry_node == RetryNode::Same;
        let worker = match worker.checked_sub(self.requests) {
            Some(first) if same && first > 0 => first,
            _ => worker,
        };
        match self.spread {
            Spread::OneNode => 0,
            Spread::RoundRobin => (worker - 1) % self.nodes,
        }
    }

    /// The nodes the workers reach: one pool each.
    pub fn nodes_used(self) -> usize {
        match self.spread {
            Spread::OneNode => 1,
            Spread::RoundRobin => self.nodes,
        }
    }

    /// The session settings of a worker's connection on this cluster.
    pub fn session(self) -> Option<&'static str> {
        self.session_with(false)
    }

    /// The same when a guard file asks for causal reads itself (`sync_wait
    /// = true`); on one server every read is causal already.
    pub fn session_with(self, file_asks: bool) -> Option<&'static str> {
        let causal = self.is_cluster() && (self.sync_wait || file_asks);
        causal.then_some("SET SESSION wsrep_sync_wait = 1")
    }
}

/// What the cluster counted during a race, summed over its nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Transactions that failed certification at COMMIT
    /// (`wsrep_local_cert_failures`).
    pub cert_failures: u64,
    /// Local transactions rolled back because a replicated one with a
    /// conflicting write had to apply (`wsrep_local_bf_aborts`).
    pub bf_aborts: u64,
    /// Local transactions so aborted while they committed, and run again
    /// by the node itself, unseen by the client (`wsrep_local_replays`).
    pub replays: u64,
}

impl Counters {
    /// The counters of one node now.
    pub async fn read(pool: &sqlx::MySqlPool) -> Result<Self> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts', 'wsrep_local_replays')",
        )
        .fetch_all(pool)
        .await?;
        let value = |name: &str| {
            rows.iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(Counters {
            cert_failures: value("wsrep_local_cert_failures"),
            bf_aborts: value("wsrep_local_bf_aborts"),
            replays: value("wsrep_local_replays"),
        })
    }

    /// The sum of the counters of every node now, but `skip`'s (a node
    /// killed in the race, whose counters went with it).
    pub async fn read_all(pools: &[sqlx::MySqlPool], skip: Option<usize>) -> Result<Self> {
        let mut sum = Counters::default();
        for (i, pool) in pools.iter().enumerate() {
            if skip == Some(i + 1) {
                continue;
            }
            let c = Self::read(pool)
                .await
                .map_err(|e| anyhow::anyhow!("node {} of the cluster: {e:#}", i + 1))?;
            sum.cert_failures += c.cert_failures;
            sum.bf_aborts += c.bf_aborts;
            sum.replays += c.replays;
        }
        Ok(sum)
    }

    /// What was counted between `before` and `self`.
    pub fn since(self, before: Counters) -> Counters {
        Counters {
            cert_failures: self.cert_failures.saturating_sub(before.cert_failures),
            bf_aborts: self.bf_aborts.saturating_sub(before.bf_aborts),
            replays: self.replays.saturating_sub(before.replays),
        }
    }
}

/// The cluster as node 1 sees it after a race: its size and its
/// component's status (`Primary` while a majority is left). A scenario's
/// `[expect]` states it in the same shape (`cluster_after`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct After {
    pub size: u64,
    pub status: String,
}

impl After {
    pub async fn read(admin: &sqlx::MySqlPool) -> Result<Self> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_cluster_status')",
        )
        .fetch_all(admin)
        .await?;
        let value = |name: &str| {
            rows.iter()
                .find(|(n, _)| n == name)
                .map_or(String::new(), |(_, v)| v.clone())
        };
        Ok(After {
            size: value("wsrep_cluster_size").parse().unwrap_or(0),
            status: crate::controls::escaped(&value("wsrep_cluster_status")).into_owned(),
        })
    }
}

/// `--kill-node`: once the workers are released, half the work later, the
/// node's server (`pid`) is killed (SIGKILL), as a machine lost mid-burst.
pub async fn kill_halfway(pid: u32, gate: Arc<OnceLock<Instant>>, half: Duration) {
    let released = loop {
        if let Some(at) = gate.get() {
            break *at;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    tokio::time::sleep_until((released + half).into()).await;
    crate::db::mariadb::server::kill_now(pid);
}
