//! The app as several processes (`--replicas N`): each an `idem replica` of its own, with its own pool and threads, behind one round-robin front port.
//!
//! Real apps run as several processes (Puma workers, containers behind a
//! load balancer), and a guard that lives in one process holds in that
//! process only. The replicas are real child processes of this one: they
//! die with it (the parent-death signal), and they work in this run's
//! schema, which only this process creates and drops.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpListener;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::settings::App;
use crate::db::Database;
use crate::db::child::die_with_parent;
use crate::db::via::Via;
use crate::http::forward::{Backend, Backends, round_robin};
use crate::http::listener::Limits;

/// The idem program replicas run, when it is not this process's own
/// (idem's tests run races from a test binary).
static PROGRAM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Runs the replicas with `program`, an idem binary, instead of this
/// process's own.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn use_program(program: std::path::PathBuf) {
    let _ = PROGRAM.set(program);
}

/// The program a replica runs: idem itself, never another program that
/// links idem's library.
fn program() -> Result<std::path::PathBuf> {
    if let Some(program) = PROGRAM.get() {
        return Ok(program.clone());
    }
    let exe = std::env::current_exe().context("could not find idem's own program")?;
    let idem = exe
        .file_stem()
        .is_some_and(|s| s.to_string_lossy().starts_with("idem"));
    if !idem {
        bail!(
            "app replicas are idem processes, and this program ({}) is not idem",
            exe.display()
        );
    }
    Ok(exe)
}

/// How long a replica may take to start and say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a replica may take to answer its parent.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The running replicas and their front door.
pub struct Replicas {
    pub(crate) front: SocketAddr,
    replicas: Vec<Mutex<Control>>,
    forwarder: JoinHandle<()>,
}

/// One replica: its process, and its end of the conversation.
struct Control {
    number: usize,
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Drop for Replicas {
    fn drop(&mut self) {
        self.forwarder.abort();
        for replica in &mut self.replicas {
            let _ = replica.get_mut().child.start_kill();
        }
    }
}

/// `limits` as a replica's flags (`idem replica` takes serve's).
fn limit_args(limits: &Limits) -> [String; 6] {
    [
        "--read-timeout-ms".into(),
        limits.read_timeout.as_millis().to_string(),
        "--idle-timeout-ms".into(),
        limits.idle_timeout.as_millis().to_string(),
        "--max-connections".into(),
        limits.max_connections.to_string(),
    ]
}

impl Replicas {
    /// Starts `app.replicas` processes of the app on `db`, each sent the app
    /// group as it is, and the front door on `listener` that hands
    /// connections to them in turn.
    pub async fn start(
        db: &Database,
        app: &App,
        listener: TcpListener,
        limits: Limits,
    ) -> Result<Self> {
        let n = app.replicas;
        // Through PgBouncer, each replica is given PgBouncer's address as
        // its database, bookkeeping and all, and goes there directly.
        let url = match app.pool.via() {
            Via::Direct => db.url_for_replicas().to_string(),
            Via::Pgbouncer => db.pgbouncer_url().await?,
        };
        let settings = serde_json::to_string(&App {
            replicas: 1,
            pool: app.pool.direct(),
            ..app.clone()
        })?;
        let exe = program()?;
        let mut replicas = Vec::with_capacity(n);
        let mut addrs = Vec::with_capacity(n);
        for number in 1..=n {
            let mut cmd = std::process::Command::new(&exe);
            cmd.args(["replica", "--number", &number.to_string()])
                .args(["--schema", &db.schema, "--input", &settings])
                .args(limit_args(&limits))
                .env("DATABASE_URL", &url)
                .env("NO_COLOR", "1")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if let Some(token) = db.cluster_token() {
                cmd.env(crate::db::ownership::TOKEN_VAR, token);
            }
            die_with_parent(&mut cmd);
            let mut child = tokio::process::Command::from(cmd)
                .kill_on_drop(true)
                .spawn()
                .context("could not start an app replica")?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                bail!("replica {number} has no pipes");
            };
            replicas.push(Control {
                number,
                child,
                stdin,
                stdout: BufReader::new(stdout).lines(),
            });
        }
        for replica in &mut replicas {
            let addr = replica.ready().await?;
            let pid = replica
                .child
                .id()
                .context("a replica exited as it started")?;
            addrs.push(Backend::new(replica.number, addr, pid));
        }
        let front = listener.local_addr()?;
        // The front door holds the same bounds as each process behind it,
        // within what two descriptors per connection leave it.
        let backends = Backends {
            replicas: addrs,
            cap: limits
                .forwarded_allowed()
                .unwrap_or(1)
                .min(limits.max_connections),
            idle: limits.idle_timeout,
        };
        Ok(Self {
            front,
            replicas: replicas.into_iter().map(Mutex::new).collect(),
            forwarder: tokio::spawn(round_robin(listener, backends)),
        })
    }

    /// Serves until dropped: the front door runs on its own.
    pub async fn serve(&self) {
        std::future::pending::<()>().await
    }

    /// Every replica forgets what its strategy keeps in memory, and starts
    /// counting its service calls again: the tables were emptied.
    pub async fn forget(&self) -> Result<()> {
        for replica in &self.replicas {
            let said = replica.lock().await.ask("forget").await?;
            if said != "ok" {
                bail!("an app replica answered {said:?} to forget");
            }
        }
        Ok(())
    }

    /// The award service's calls every replica made since it last forgot.
    pub async fn calls(&self) -> Result<u64> {
        let mut calls = 0;
        for replica in &self.replicas {
            let said = replica.lock().await.ask("calls").await?;
            calls += said
                .parse::<u64>()
                .with_context(|| format!("an app replica counted {said:?} calls"))?;
        }
        Ok(calls)
    }
}

impl Control {
    /// The address the replica says it listens on.
    async fn ready(&mut self) -> Result<SocketAddr> {
        let line = self.line(START_TIMEOUT).await?;
        let ready: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("replica {} said {line:?}", self.number))?;
        let url = ready["url"].as_str().unwrap_or_default();
        url.trim_start_matches("http://")
            .parse()
            .with_context(|| format!("replica {} listens at {url:?}", self.number))
    }

    async fn ask(&mut self, question: &str) -> Result<String> {
        self.stdin
            .write_all(format!("{question}\n").as_bytes())
            .await
            .with_context(|| format!("replica {} is gone", self.number))?;
        self.stdin.flush().await?;
        self.line(ANSWER_TIMEOUT).await
    }

    async fn line(&mut self, limit: Duration) -> Result<String> {
        match tokio::time::timeout(limit, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(_) => bail!("replica {} stopped (its reason is above)", self.number),
            Err(_) => bail!(
                "replica {} said nothing within {} s",
                self.number,
                limit.as_secs()
            ),
        }
    }
}
