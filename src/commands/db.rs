//! `idem db`: a disposable PostgreSQL for a program of your own (the Ruby challenge's app), removed when it is done.
//!
//! Without a command it prints how to reach the cluster and keeps it until
//! Ctrl-C or SIGTERM. With one (`idem db -- ruby app.rb`) it runs it with
//! `DATABASE_URL` and libpq's `PG*` variables set, and removes the cluster
//! when the command exits, passing on its exit code.
//!
//! The command runs in a process group of its own, which never outlives
//! idem: beside the command, in its group, a watcher holds the read end of
//! a pipe whose write end only idem holds, and kills the whole group once
//! that pipe closes, which it does however idem ends (`kill -9`
//! included). A command told to stop that is still there after the grace
//! period is killed with its whole group. On a terminal the command's
//! group is made the foreground one while it runs, so it reads the
//! terminal and Ctrl-C reaches it as it would from a shell.

use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::command::{Command, Given, Needs, Nothing, OnSignal, Stop};
use crate::cli::teaching::DbArgs;
use crate::db::{Cluster, ClusterOptions};
use crate::lifeline::{Lifeline, Watched};
use crate::report::emit_verbatim;

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
            // What lets idem on that URL prove the cluster its own (and
            // so race a guard file there); it opens nothing by itself.
            (crate::db::ownership::TOKEN_VAR, cluster.token.clone()),
        ];
        Ok(Reach { url, vars })
    }
}

/// Checks the command line before any cluster starts.
pub fn plan(args: &DbArgs) -> Result<Plan> {
    if let Some(program) = args.command.first()
        && program.is_empty()
    {
        bail!("idem db -- COMMAND: the command is empty");
    }
    Ok(Plan {
        command: args.command.clone(),
        cluster: args.cluster.options(),
    })
}

/// A disposable cluster held until a signal, or for a command's lifetime.
pub struct Plan {
    /// The command to run against it, if any (`idem db -- CMD ...`).
    command: Vec<String>,
    cluster: ClusterOptions,
}

/// The cluster is the command's own: started and stopped by its run, which
/// is told of a signal and stops its command within a grace period.
impl Command for Plan {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(()).on_signal(OnSignal::Tells)
    }

    async fn run(self, _: &Nothing, mut given: Given) -> Result<()> {
        let stop = &mut given.stop;
        let opts = self.cluster;
        let start = tokio::task::spawn_blocking(move || Cluster::start(&opts));
        let cluster = tokio::select! {
            biased;
            signal = stop.requested() => return Err(signal.into()),
            started = start => started.context("the cluster start-up was interrupted")??,
        };
        let reach = Reach::of(&cluster)?;
        let outcome = match self.command.split_first() {
            None => hold(&reach, stop).await,
            Some((program, rest)) => run(program, rest, &reach, stop).await,
        };
        tokio::task::spawn_blocking(move || cluster.stop())
            .await
            .context("the cluster's stop was interrupted")??;
        outcome
    }
}

/// Prints how to reach the cluster and keeps it until a signal.
async fn hold(reach: &Reach, stop: &mut Stop) -> Result<()> {
    let exports: Vec<String> = reach
        .vars
        .iter()
        .map(|(name, value)| format!("export {name}='{value}'"))
        .collect();
    // For a shell to read (`eval "$(idem db)"`): never wrapped.
    emit_verbatim(&format!("{}\n", exports.join("\n")))?;
    eprintln!("idem db: a disposable cluster, removed on Ctrl-C or SIGTERM");
    let signal = stop.requested().await;
    eprintln!("idem db: {}; removing the cluster", signal.name);
    Ok(())
}

/// Runs beside the command in its group: waits for idem's pipe to close,
/// then kills the group. It ignores the signals a terminal or idem send
/// the group, so only the pipe ends it; then `exec` drops the pipe from
/// the command itself.
/// Runs the command against the cluster and passes on how it ended.
async fn run(program: &str, rest: &[String], reach: &Reach, stop: &mut Stop) -> Result<()> {
    if !runnable(program) {
        bail!("could not run {program}: no such program (on PATH, or at that path)");
    }
    eprintln!(
        "idem db: DATABASE_URL={} (removed when {program} exits)",
        reach.url
    );
    let (mut child, lifeline) = spawn_watched(program, rest, reach)?;
    let group = child.id().map(|pid| pid as libc::pid_t);
    let terminal = group.and_then(Terminal::hand_to);
    let ended = tokio::select! {
        status = child.wait() => Ok(status?),
        signal = stop.requested() => Err(signal),
    };
    drop(terminal);
    let status = match ended {
        Ok(status) => status,
        Err(signal) => {
            if let Some(group) = group {
                signal_group(group, signal.number);
            }
            let stopped = tokio::time::timeout(STOP_GRACE, child.wait()).await;
            if !matches!(stopped, Ok(Ok(_))) {
                eprintln!(
                    "idem db: {program} did not stop within {} s of {}; killing its process group",
                    STOP_GRACE.as_secs(),
                    signal.name
                );
            }
            end_group(&mut child, group, lifeline).await;
            // Stopped as asked, like `idem db` alone and `idem serve`: a
            // calm end, not an error.
            eprintln!(
                "idem db: {}; {program} stopped, removing the cluster",
                signal.name
            );
            return Ok(());
        }
    };
    // What the command left running in its group goes with the cluster.
    end_group(&mut child, group, lifeline).await;
    passed_on(status)
}

/// Starts the command under a watcher (see [`crate::lifeline`]), in a
/// process group of its own, with the cluster's variables.
fn spawn_watched(
    program: &str,
    rest: &[String],
    reach: &Reach,
) -> Result<(tokio::process::Child, Lifeline)> {
    let mut watched =
        Watched::new("idem-db", program, rest).context("could not make the command's lifeline")?;
    watched
        .command()
        .envs(reach.vars.iter().map(|(k, v)| (*k, v.as_str())));
    watched
        .spawn()
        .with_context(|| format!("could not run {program}"))
}

/// The command's exit, as idem's own: its code, or 128 + the signal that
/// ended it.
fn passed_on(status: std::process::ExitStatus) -> Result<()> {
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

/// Kills what is left of the command's group (closing the lifeline makes
/// its watcher do so too), and says so if anything is still there a
/// second later.
async fn end_group(
    child: &mut tokio::process::Child,
    group: Option<libc::pid_t>,
    lifeline: Lifeline,
) {
    drop(lifeline);
    let Some(group) = group else { return };
    signal_group(group, libc::SIGKILL);
    // The command itself is idem's to reap; the rest, orphans by now, are
    // reaped by whoever adopted them.
    let _ = child.wait().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while alive_in(group) > 0 {
        if tokio::time::Instant::now() > deadline {
            eprintln!(
                "idem db: process group {group} of the command still has processes after SIGKILL \
                 (stuck in the kernel?); they are left as they are"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How many processes of `group` are alive (a zombie, dead but not yet
/// reaped by whoever adopted it, is not), as `/proc` says.
fn alive_in(group: libc::pid_t) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // After the command's name in parentheses: state, ppid, pgrp.
            let Some((_, after)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = after.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|p| p.parse::<libc::pid_t>().ok());
            pgrp == Some(group) && state != Some("Z")
        })
        .count()
}

/// Sends `signal` to every process of `group`.
fn signal_group(group: libc::pid_t, signal: i32) {
    // SAFETY: kill sends a signal to the process group this process made.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Whether `program` names something that can be run: a path to an
/// executable file, or a name found on `PATH`.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
    })
}

/// The terminal, lent to the command's process group while it runs (as a
/// shell does for a job), and taken back when dropped.
struct Terminal {
    ours: libc::pid_t,
}

impl Terminal {
    /// Makes `group` the terminal's foreground group, if idem's own group
    /// is it now (idem runs in the foreground of a terminal).
    fn hand_to(group: libc::pid_t) -> Option<Self> {
        // SAFETY: these calls only ask and set the terminal's foreground group.
        unsafe {
            if libc::isatty(0) != 1 {
                return None;
            }
            let ours = libc::getpgrp();
            if libc::tcgetpgrp(0) != ours {
                return None;
            }
            with_ttou_ignored(|| libc::tcsetpgrp(0, group) == 0).then_some(Self { ours })
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // SAFETY: gives the terminal back to idem's own group.
        unsafe {
            with_ttou_ignored(|| libc::tcsetpgrp(0, self.ours) == 0);
        }
    }
}

/// Runs `f` with SIGTTOU ignored: a process outside the foreground group
/// that sets the foreground group would otherwise be stopped by it.
unsafe fn with_ttou_ignored(f: impl FnOnce() -> bool) -> bool {
    // SAFETY: the old disposition is put back right after.
    unsafe {
        let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        let done = f();
        libc::signal(libc::SIGTTOU, old);
        done
    }
}
