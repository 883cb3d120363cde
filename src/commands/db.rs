//! `idem db`: a disposable PostgreSQL for a program of your own (the Ruby challenge's app), removed when it is done.
//!
//! Without a command it prints how to reach the cluster and keeps it until
//! Ctrl-C or SIGTERM. With one (`idem db -- ruby app.rb`) it runs it with
//! `DATABASE_URL` and libpq's `PG*` variables set, and removes the cluster
//! when the command exits, passing on its exit code.

use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cli::teaching::DbArgs;
use crate::db::{Cluster, ClusterOptions};
use crate::report::emit;
use crate::signals::Signals;

/// How long a command told to stop (SIGTERM) may take before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The command's own exit code, for idem to exit with: it has already said
/// what it had to say.
#[derive(Debug, thiserror::Error)]
#[error("the command exited with {code}")]
pub struct ExitWith {
    pub code: u8,
}

/// How a program reaches the cluster: libpq's variables and the URL made
/// from them (a unix socket, the `postgres` user and database).
struct Reach {
    url: String,
    vars: Vec<(&'static str, String)>,
}

impl Reach {
    fn of(cluster: &Cluster) -> Result<Self> {
        let dir = cluster.socket_dir().to_str().context(
            "the cluster's socket directory is not valid UTF-8; set TMPDIR to a plain path",
        )?;
        if dir.contains(['&', '#', '?', '%', ' ', '\'']) {
            bail!(
                "the cluster's socket directory {dir:?} cannot go in a URL; set TMPDIR to a plain path"
            );
        }
        let url = format!("postgresql:///postgres?host={dir}&user=postgres");
        let vars = vec![
            ("DATABASE_URL", url.clone()),
            ("PGHOST", dir.to_string()),
            ("PGUSER", "postgres".to_string()),
            ("PGDATABASE", "postgres".to_string()),
        ];
        Ok(Reach { url, vars })
    }
}

/// Checks the command line before any cluster starts.
pub fn plan(args: &DbArgs) -> Result<ClusterOptions> {
    if let Some(program) = args.command.first()
        && program.is_empty()
    {
        bail!("idem db -- COMMAND: the command is empty");
    }
    Ok(args.cluster.options())
}

pub async fn execute(args: &DbArgs, opts: ClusterOptions, signals: &mut Signals) -> Result<()> {
    let start = tokio::task::spawn_blocking(move || Cluster::start(&opts));
    let cluster = tokio::select! {
        biased;
        signal = signals.received() => return Err(signal.into()),
        started = start => started.context("the cluster start-up was interrupted")??,
    };
    let reach = Reach::of(&cluster)?;
    let outcome = match args.command.split_first() {
        None => hold(&reach, signals).await,
        Some((program, rest)) => run(program, rest, &reach, signals).await,
    };
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .context("the cluster's stop was interrupted")??;
    outcome
}

/// Prints how to reach the cluster and keeps it until a signal.
async fn hold(reach: &Reach, signals: &mut Signals) -> Result<()> {
    let exports: Vec<String> = reach
        .vars
        .iter()
        .map(|(name, value)| format!("export {name}='{value}'"))
        .collect();
    emit(&format!("{}\n", exports.join("\n")))?;
    eprintln!("idem db: a disposable cluster, removed on Ctrl-C or SIGTERM");
    let signal = signals.received().await;
    eprintln!("idem db: {}; removing the cluster", signal.name);
    Ok(())
}

/// Runs the command against the cluster and passes on how it ended.
async fn run(program: &str, rest: &[String], reach: &Reach, signals: &mut Signals) -> Result<()> {
    eprintln!(
        "idem db: DATABASE_URL={} (removed when {program} exits)",
        reach.url
    );
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .envs(reach.vars.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("could not run {program}"))?;
    let status = tokio::select! {
        status = child.wait() => status?,
        signal = signals.received() => {
            // Ctrl-C reached the command too (one process group); SIGTERM
            // may have come to idem alone, so it is passed on.
            if let Some(pid) = child.id() {
                // SAFETY: kill sends a signal to the child this process started.
                unsafe {
                    libc::kill(pid as i32, signal.number);
                }
            }
            match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                Ok(status) => status?,
                Err(_) => {
                    child.kill().await?;
                    child.wait().await?
                }
            };
            return Err(signal.into());
        }
    };
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(ExitWith {
            code: u8::try_from(code).unwrap_or(1),
        }
        .into()),
        None => {
            use std::os::unix::process::ExitStatusExt;
            let code = 128 + status.signal().unwrap_or(0);
            Err(ExitWith {
                code: u8::try_from(code).unwrap_or(1),
            }
            .into())
        }
    }
}
