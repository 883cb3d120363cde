//! A PostgreSQL server under idem's supervisor shell: started, waited for, and stopped with its run directory however idem ends.
//!
//! The server is not started by idem directly but by a tiny supervisor shell
//! whose standard input is a pipe from idem: when idem closes that pipe, or
//! dies in any way at all (even `kill -9`), the supervisor reads
//! end-of-file, stops the server and removes the run directory. The
//! disposable cluster is one such server; its hot standby is another.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::child::check_stop;
use super::os_user::OsUser;
use crate::files::owners::alive;

/// How long the server may take to accept connections before idem gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The supervisor: starts the server, prints its pid, then waits for its
/// standard input to close, stops the server with a signal (SIGQUIT for
/// postgres, an immediate shutdown: no shutdown checkpoint, since the files
/// go next; SIGKILL for mariadbd, whose files go too) and removes the run
/// directory. `$1` is the server's binary, `$2` the run directory, `$3`
/// the log's name in it, `$4` the stop signal, `$5` `group` when the server
/// starts programs of its own that must go with it (a Galera node's state
/// transfer scripts and their rsync): it then runs in a process group of
/// its own (`setsid`), and the stop signal goes to the whole group. The
/// rest are the server's own arguments.
///
/// The group a server leads exists only once `setsid` has made it: a stop
/// sent before that goes to the server's own pid, so it is never lost.
///
/// Two traps of `sh` are closed here. A reader that is gone (idem killed
/// before it read the pid) must not kill the supervisor with SIGPIPE, so
/// SIGPIPE is ignored. And a background job may start before postgres
/// installs its own handlers, so a stop sent in its first milliseconds
/// could be lost: the signal is repeated until postgres is gone.
const SUPERVISOR: &str = r#"
trap '' PIPE
pg=$1; run=$2; log=$3; sig=$4; group=$5; shift 5
if [ "$group" = group ]; then
  setsid "$pg" "$@" >"$run/$log" 2>&1 </dev/null &
  server=$!; target=-$server
else
  "$pg" "$@" >"$run/$log" 2>&1 </dev/null &
  server=$!; target=$server
fi
echo $server
exec >/dev/null 2>&1
cat >/dev/null
( while kill -"$sig" "$target" || kill -"$sig" "$server"; do sleep 0.05; done ) &
repeater=$!
wait "$server"
kill "$repeater"
rm -rf "$run"
"#;

/// What the supervisor starts: a server's program, its log's name in the
/// run directory, the signal that stops it, and its arguments.
pub struct Launch<'a> {
    pub program: &'a Path,
    pub log: &'static str,
    pub stop_signal: &'static str,
    /// Whether the server's own children (a Galera node's state transfer
    /// scripts) are stopped with it: the server then leads a process
    /// group of its own, and the whole group gets the stop signal.
    pub with_children: bool,
    pub args: Vec<std::ffi::OsString>,
}

/// A running server and its supervisor. Dropping it stops the server and
/// removes the run directory.
#[derive(Debug)]
pub struct Supervised {
    /// The run directory: the data in `data/`, the socket, the log.
    pub(crate) run_dir: PathBuf,
    /// The server's process id.
    pid: u32,
    /// The server's log, in the run directory.
    log: &'static str,
    supervisor: Option<Child>,
    pipe: Option<ChildStdin>,
}

impl Supervised {
    /// Starts `postgres` on `run_dir/data` with its socket in `run_dir`
    /// and `settings` (`-c name=value` pairs), as `user` if given, and
    /// waits until `postmaster.pid` says `ready_as` (`ready`, which a hot
    /// standby says once it takes read-only connections). The run
    /// directory is removed if it fails.
    pub fn start(
        postgres: &Path,
        run_dir: &Path,
        user: Option<OsUser>,
        settings: &[String],
        ready_as: &str,
    ) -> Result<Self> {
        let mut args = vec![
            "-D".into(),
            run_dir.join("data").into(),
            "-k".into(),
            run_dir.into(),
        ];
        args.extend(settings.iter().map(Into::into));
        let launch = Launch {
            program: postgres,
            log: "postgres.log",
            stop_signal: "QUIT",
            with_children: false,
            args,
        };
        let server = Self::spawn(&launch, run_dir, user)?;
        server.wait_until(ready_as)?;
        Ok(server)
    }

    /// Starts `launch` under the supervisor, with `run_dir` as its run
    /// directory, as `user` if given, and returns once its pid is known:
    /// waiting until it takes connections is the caller's. The run
    /// directory is removed if it fails.
    pub fn spawn(launch: &Launch, run_dir: &Path, user: Option<OsUser>) -> Result<Self> {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(SUPERVISOR)
            .arg("idem-supervisor")
            .arg(launch.program)
            .arg(run_dir)
            .arg(launch.log)
            .arg(launch.stop_signal)
            .arg(if launch.with_children {
                "group"
            } else {
                "alone"
            })
            .args(&launch.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C at the terminal reaches idem
            // alone, and idem decides how the server stops.
            .process_group(0);
        if let Some(user) = user {
            cmd.uid(user.uid).gid(user.gid);
        }
        let mut supervisor = match cmd.spawn() {
            Ok(child) => child,
            Err(err) => {
                let _ = fs::remove_dir_all(run_dir);
                return Err(err).context("could not start the server's supervisor (/bin/sh)");
            }
        };
        let pipe = supervisor.stdin.take();
        let mut server = Supervised {
            run_dir: run_dir.to_path_buf(),
            pid: 0,
            log: launch.log,
            supervisor: Some(supervisor),
            pipe,
        };
        // From here on, dropping `server` on an error cleans everything up.
        server.pid = server.read_pid()?;
        Ok(server)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn read_pid(&mut self) -> Result<u32> {
        let out = self
            .supervisor
            .as_mut()
            .and_then(|s| s.stdout.take())
            .context("the supervisor has no output pipe")?;
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        line.trim()
            .parse()
            .with_context(|| format!("the supervisor did not report a server pid ({line:?})"))
    }

    /// Polls `postmaster.pid` until the server says `ready_as`, as `pg_ctl` does.
    fn wait_until(&self, ready_as: &str) -> Result<()> {
        let pid_file = self.run_dir.join("data").join("postmaster.pid");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            check_stop()?;
            if let Ok(text) = fs::read_to_string(&pid_file)
                && text.lines().nth(7).map(str::trim) == Some(ready_as)
            {
                return Ok(());
            }
            if !alive(self.pid) {
                bail!("PostgreSQL did not start: {}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!(
                    "PostgreSQL did not accept connections within {} s: {}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The server log's last meaningful line, for error messages.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.run_dir.join(self.log)).unwrap_or_default();
        log.lines()
            .rfind(|l| l.contains("FATAL") || l.contains("ERROR"))
            .or_else(|| log.lines().rfind(|l| !l.trim().is_empty()))
            .unwrap_or("no log written")
            .trim()
            .to_string()
    }

    /// Stops the server and removes the run directory.
    pub fn shut_down(&mut self) -> Result<()> {
        // Closing the pipe is the stop signal; the supervisor does the rest.
        drop(self.pipe.take());
        if let Some(mut supervisor) = self.supervisor.take() {
            supervisor
                .wait()
                .context("could not wait for the server to stop")?;
        }
        Ok(())
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}
