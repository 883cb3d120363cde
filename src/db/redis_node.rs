//! One of idem's own `redis-server`s: found, started under the supervisor in a private directory with a Unix socket of its own, connected to, and removed however the run ends.
//!
//! A single node has no TCP port at all. A node of a pair (a primary and
//! its replica, see [`super::redis_replica`]) also listens on a loopback
//! port, since Redis replicates over TCP only, and asks a password drawn
//! for the run, written in its settings file, never on its command line.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::db::child::check_stop;
use crate::db::cluster::runs_parent;
use crate::db::leftovers;
use crate::db::os_user::{chown_tree, server_user};
use crate::db::redis_url::{COMMAND_LIMIT, bounded, open};
use crate::db::supervised::{Launch, Supervised};
use crate::db::template::private_dir;
use crate::files::owners::alive;

/// How long the server may take to answer its first PING.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// Run directories of the servers idem starts: `idem-redis-<pid>-<hex>`.
const RUN_PREFIX: &str = "idem-redis";

/// The most memory the server may use: a race writes a few hundred keys.
const MAX_MEMORY: &str = "64mb";

/// Where `redis-server` is looked for when it is not on the PATH.
const PLACES: [&str; 2] = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"];

/// `redis-server`: on the PATH, or where Debian's package puts it.
pub fn locate() -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("redis-server"));
    on_path
        .chain(PLACES.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .context("no redis-server found (install redis-server) for --store redis")
}

/// The server's settings: a socket in `run_dir` only its user may reach,
/// no TCP port, no snapshot and no append-only file, a memory limit that
/// refuses writes rather than evict claims.
fn server_args(run_dir: &Path) -> Vec<std::ffi::OsString> {
    let socket = run_dir.join("redis.sock");
    [
        "--port".into(),
        "0".into(),
        "--unixsocket".into(),
        socket.display().to_string(),
        "--unixsocketperm".into(),
        "700".into(),
        "--dir".into(),
        run_dir.display().to_string(),
        "--save".into(),
        String::new(),
        "--appendonly".into(),
        "no".into(),
        "--maxmemory".into(),
        MAX_MEMORY.into(),
        "--maxmemory-policy".into(),
        "noeviction".into(),
        "--daemonize".into(),
        "no".into(),
    ]
    .into_iter()
    .map(Into::into)
    .collect()
}

/// Connects once the socket answers PING; stops at a signal, a dead
/// server, or the time limit.
async fn connected(
    server: &Supervised,
    client: &redis::Client,
    socket: &Path,
) -> Result<redis::aio::MultiplexedConnection> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        check_stop()?;
        if socket.exists()
            && let Ok(Ok(mut conn)) = tokio::time::timeout(COMMAND_LIMIT, open(client)).await
            && bounded(redis::cmd("PING").query_async::<String>(&mut conn), "PING")
                .await
                .is_ok()
        {
            return Ok(conn);
        }
        if !alive(server.pid()) {
            bail!("Redis did not start: {}", server.log_tail());
        }
        if Instant::now() > deadline {
            bail!(
                "Redis did not answer within {} s: {}",
                READY_TIMEOUT.as_secs(),
                server.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts a node and connects to it: alone, or with `pair` a node of a
/// pair. Its run directory is removed if it fails.
pub async fn start(pair: Option<&PairSettings<'_>>) -> Result<Node> {
    let program = locate()?;
    let user = server_user("redis", "Redis")?;
    let parent = runs_parent();
    leftovers::sweep(&parent, RUN_PREFIX);
    let run_dir = private_dir(&parent, RUN_PREFIX)?;
    let prepared = prepare(&run_dir, pair).and_then(|args| match user {
        Some(user) => chown_tree(&run_dir, user).map(|()| args),
        None => Ok(args),
    });
    let args = match prepared {
        Ok(args) => args,
        Err(err) => {
            let _ = fs::remove_dir_all(&run_dir);
            return Err(err);
        }
    };
    let launch = Launch {
        program: &program,
        log: "redis.log",
        stop_signal: "KILL",
        with_children: false,
        args,
    };
    let server = Supervised::spawn(&launch, &run_dir, user)?;
    let socket = run_dir.join("redis.sock");
    let client = client(&socket, pair.map(|p| p.password))?;
    let conn = connected(&server, &client, &socket).await?;
    Ok(Node {
        server,
        port: pair.map(|p| p.port),
        client,
        conn,
    })
}

/// The server's arguments, with a pair's settings file written first.
fn prepare(run_dir: &Path, pair: Option<&PairSettings<'_>>) -> Result<Vec<std::ffi::OsString>> {
    let Some(pair) = pair else {
        return Ok(server_args(run_dir));
    };
    let file = run_dir.join("redis.conf");
    crate::files::write::create_new(&file, pair.text().as_bytes(), "Redis's settings")?;
    let mut args = vec![file.into_os_string()];
    args.extend(server_args(run_dir));
    args.extend(pair.args());
    Ok(args)
}

/// One of idem's own `redis-server`s.
pub struct Node {
    pub server: Supervised,
    /// Its loopback port, in a pair.
    pub port: Option<u16>,
    /// Where new connections to it come from (`WAIT` needs one of its own).
    pub client: redis::Client,
    /// The connection every request shares (multiplexed).
    pub conn: redis::aio::MultiplexedConnection,
}

impl Node {
    /// The 8 hex digits that end its run directory's name.
    pub fn hex(&self) -> String {
        self.server
            .run_dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit('-').next())
            .unwrap_or("run")
            .to_string()
    }
}

/// What a node of a pair is told beside [`super::redis_server`]'s own
/// arguments: its port and password, and whose replica it is.
pub struct PairSettings<'a> {
    pub port: u16,
    pub password: &'a str,
    pub replica_of: Option<u16>,
}

impl PairSettings<'_> {
    /// The settings file's text. Diskless sync without delay: a new
    /// replica's first sync sends the data set over the socket at once
    /// instead of writing it to disk after five seconds. The process's
    /// title names its socket, in its run directory, as a single node's
    /// does: `ps` shows whose server it is.
    pub fn text(&self) -> String {
        let mut text = format!(
            "requirepass {pw}\nmasterauth {pw}\nrepl-diskless-sync yes\n\
             repl-diskless-sync-delay 0\nproc-title-template \"{{title}} {{unixsocket}} \
             {{listen-addr}}\"\n",
            pw = self.password
        );
        if let Some(port) = self.replica_of {
            text.push_str(&format!("replicaof 127.0.0.1 {port}\n"));
        }
        text
    }

    /// The arguments after the settings file: the port, on loopback only.
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        [
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
        ]
        .into_iter()
        .map(Into::into)
        .collect()
    }
}

/// A connection to the node at `socket` with `password`, if it asks one.
pub fn client(socket: &Path, password: Option<&str>) -> Result<redis::Client> {
    let mut url = url::Url::parse("redis+unix:///")?;
    url.set_path(
        socket
            .to_str()
            .with_context(|| format!("{} is not UTF-8", socket.display()))?,
    );
    if let Some(password) = password {
        url.query_pairs_mut().append_pair("pass", password);
    }
    Ok(redis::Client::open(url.as_str())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_told_its_primary_and_both_the_password() {
        let settings = PairSettings {
            port: 7002,
            password: "pw",
            replica_of: Some(7001),
        };
        let text = settings.text();
        assert!(text.contains("requirepass pw\n"), "{text}");
        assert!(text.contains("masterauth pw\n"), "{text}");
        assert!(text.contains("replicaof 127.0.0.1 7001\n"), "{text}");
        assert!(text.contains("repl-diskless-sync-delay 0\n"), "{text}");
        let args: Vec<_> = settings
            .args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(args, ["--port", "7002", "--bind", "127.0.0.1"]);
    }

    #[test]
    fn the_password_goes_in_the_socket_url_escaped() {
        let client = client(Path::new("/run/idem/redis.sock"), Some("a b&c")).unwrap();
        let info = client.get_connection_info();
        assert_eq!(info.redis_settings().password(), Some("a b&c"));
    }
}
