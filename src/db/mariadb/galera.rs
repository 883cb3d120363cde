//! A disposable Galera cluster: N MariaDB nodes on loopback, every one a primary, made and removed as the single disposable server is.
//!
//! Node 1 bootstraps a new cluster; the others join it, each taking the
//! cluster's state from a donor by `rsync` (state snapshot transfer), and
//! idem waits until every node says it is Synced and the cluster is the
//! Primary component of N. Each node is a [`MariadbServer`] of its own
//! under the supervisor: its own run directory, its own Unix socket for
//! clients, and three loopback TCP ports the nodes need among themselves
//! (group communication, incremental and snapshot transfers). However
//! idem ends, each node's supervisor kills it and removes its files.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sqlx::ConnectOptions;
use sqlx::mysql::MySqlConnectOptions;

use super::server::MariadbServer;
use super::{ADMIN_ACQUIRE, Mariadb, MariadbOptions};
use crate::db::child::check_stop;

/// Where Debian's `galera-4` puts the provider.
const PROVIDERS: [&str; 2] = [
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib/libgalera_smm.so",
];

/// How long the cluster may take to have every node Synced (8 to 10 s
/// here for three nodes).
const SYNC_LIMIT: Duration = Duration::from_secs(120);

/// The Galera provider's library, or why there is none; and `rsync`, by
/// which the joining nodes take the cluster's state.
fn provider() -> Result<&'static str> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("rsync").is_file()) {
        bail!("no rsync found (install rsync: the joining nodes take the cluster's state by it)");
    }
    PROVIDERS
        .iter()
        .copied()
        .find(|p| Path::new(p).is_file())
        .context("no Galera provider found (install galera-4 beside mariadb-server)")
}

/// One node's three ports among the nodes.
#[derive(Debug, Clone, Copy)]
struct Ports {
    group: u16,
    ist: u16,
    sst: u16,
}

/// The settings that make a server node `n` (1-based) of the cluster
/// `name`: a name of its own, so that a joiner that reached another run's
/// cluster on a port that was ours a moment before is refused there.
fn node_args(
    provider: &str,
    (name, n): (&str, usize),
    ports: Ports,
    join: Option<u16>,
) -> Vec<String> {
    let address = match join {
        Some(first) => format!("gcomm://127.0.0.1:{first}"),
        None => "gcomm://".to_string(),
    };
    let mut args = vec![
        "--wsrep-on=ON".to_string(),
        format!("--wsrep-provider={provider}"),
        format!("--wsrep-cluster-name={name}"),
        format!("--wsrep-node-name=node{n}"),
        format!("--wsrep-node-address=127.0.0.1:{}", ports.group),
        format!(
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};\
             ist.recv_addr=127.0.0.1:{};gcache.size=32M",
            ports.group, ports.ist
        ),
        format!("--wsrep-sst-receive-address=127.0.0.1:{}", ports.sst),
        "--wsrep-sst-method=rsync".into(),
        format!("--wsrep-cluster-address={address}"),
        "--binlog-format=ROW".into(),
        "--innodb-autoinc-lock-mode=2".into(),
    ];
    if join.is_none() {
        args.push("--wsrep-new-cluster".into());
    }
    args
}

/// Starts an `n`-node cluster and waits until it is whole: node 1 first,
/// then the rest at once.
pub async fn start(
    bin: Option<&Path>,
    cache: Option<&Path>,
    n: usize,
) -> Result<Vec<MariadbServer>> {
    let provider = provider()?;
    let ports: Vec<Ports> = (0..n)
        .map(|_| {
            Ok(Ports {
                group: crate::db::ports::free_port()?,
                ist: crate::db::ports::free_port()?,
                sst: crate::db::ports::free_port()?,
            })
        })
        .collect::<Result<_>>()?;
    let (bin, cache) = (bin.map(Path::to_path_buf), cache.map(Path::to_path_buf));
    let first = ports[0];
    let name = format!("idem-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let start_node = move |i: usize| {
        let (bin, cache) = (bin.clone(), cache.clone());
        let join = (i > 0).then_some(first.group);
        let args = node_args(provider, (&name, i + 1), ports[i], join);
        tokio::task::spawn_blocking(move || {
            MariadbServer::start_with(bin.as_deref(), cache.as_deref(), |_| args)
        })
    };
    let shown = showing(n);
    let mut nodes = vec![start_node(0).await??];
    wait_synced(&nodes[0], 1).await?;
    shown.set_message(format!("node 1 bootstrapped; {} joining by rsync", n - 1));
    let joining: Vec<_> = (1..n).map(&start_node).collect();
    for node in joining {
        nodes.push(node.await??);
    }
    for (i, node) in nodes.iter().enumerate() {
        wait_synced(node, n).await?;
        shown.set_message(format!("{} of {n} nodes synced", i + 1));
    }
    shown.finish_and_clear();
    Ok(nodes)
}

/// A spinner on a terminal's stderr while the nodes start and sync (8 to
/// 10 s for three): nothing elsewhere.
fn showing(n: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner:.cyan} a Galera cluster of {prefix}: {msg} · {elapsed}",
    ) {
        bar.set_style(style);
    }
    bar.set_prefix(n.to_string());
    bar.set_message("bootstrapping node 1");
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Waits until `node` says it is Synced in a Primary component of `size`.
async fn wait_synced(node: &MariadbServer, size: usize) -> Result<()> {
    let options = MySqlConnectOptions::new()
        .socket(&node.socket)
        .username("root")
        .disable_statement_logging();
    let mut conn = options.connect().await?;
    let deadline = Instant::now() + SYNC_LIMIT;
    loop {
        check_stop()?;
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_cluster_size')",
        )
        .fetch_all(&mut conn)
        .await?;
        let value = |name: &str| {
            rows.iter()
                .find(|(n, _)| n == name)
                .map_or("", |(_, v)| v.as_str())
        };
        if value("wsrep_local_state_comment") == "Synced"
            && value("wsrep_cluster_status") == "Primary"
            && value("wsrep_cluster_size") == size.to_string()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the Galera cluster was not whole within {} s: a node says {}, {}, size {}",
                SYNC_LIMIT.as_secs(),
                value("wsrep_local_state_comment"),
                value("wsrep_cluster_status"),
                value("wsrep_cluster_size")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Bookkeeping reads what every node committed: causal reads
/// (`wsrep_sync_wait`), so that a count on node 1 waits for the writes
/// other nodes certified before it.
const CAUSAL: &str = "SET SESSION wsrep_sync_wait = 1";

impl Mariadb {
    /// A cluster of `options.nodes` nodes, the run's database made on node
    /// 1 and seen, with every table, on every node before any race.
    pub(super) async fn open_cluster(options: &MariadbOptions) -> Result<Self> {
        let bin = options.bin.as_deref();
        let servers = start(bin, options.template_cache.as_deref(), options.nodes).await?;
        let root = |s: &MariadbServer| {
            MySqlConnectOptions::new()
                .socket(&s.socket)
                .username("root")
                .disable_statement_logging()
        };
        let mut db = Mariadb::made_in(root(&servers[0]), None).await?;
        db.version = servers[0].bins.version.clone();
        db.node_workers = servers
            .iter()
            .map(|s| root(s).database(&db.database))
            .collect();
        db.admin.close().await;
        db.admin = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(ADMIN_ACQUIRE)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute(CAUSAL).await.map(drop)
                })
            })
            .connect_with(db.workers.clone())
            .await?;
        for node in &db.node_workers {
            tables_seen(node, &db.database, db.made.len()).await?;
        }
        let mut servers = servers.into_iter();
        db.server = servers.next();
        db.others = servers.collect();
        Ok(db)
    }
}

impl Mariadb {
    /// On a cluster, a pool of one root connection to each node, made
    /// when first used, for the step controller to read what each node
    /// has applied; none on a single server.
    pub fn node_watchers(&self) -> Vec<sqlx::MySqlPool> {
        if self.others.is_empty() {
            return Vec::new();
        }
        let pool = |options: &MySqlConnectOptions| {
            sqlx::mysql::MySqlPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(ADMIN_ACQUIRE)
                .connect_lazy_with(options.clone())
        };
        self.node_workers.iter().map(pool).collect()
    }

    /// A connection of root's to node `node` (1-based) of the cluster idem
    /// started, for what only an administrator may do there (hold its
    /// applier, read its status).
    pub async fn node_admin(&self, node: usize) -> Result<sqlx::MySqlConnection> {
        use sqlx::ConnectOptions;
        match self.node_workers.get(node.wrapping_sub(1)) {
            Some(options) if self.others.len() + 1 >= node => Ok(options.connect().await?),
            _ => bail!("there is no node {node} in this cluster"),
        }
    }
}

/// Waits until the node `node` leads to sees the run database's `tables`
/// (the DDL of node 1, applied on every node in the same order).
async fn tables_seen(node: &MySqlConnectOptions, database: &str, tables: usize) -> Result<()> {
    let mut conn = node.connect().await?;
    let deadline = Instant::now() + SYNC_LIMIT;
    loop {
        let seen: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
        )
        .bind(database)
        .fetch_one(&mut conn)
        .await?;
        if seen as usize >= tables {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "a node of the cluster did not see the run's tables within {} s",
                SYNC_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
