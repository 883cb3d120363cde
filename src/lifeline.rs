//! A command whose whole process group never outlives idem, however idem ends (`kill -9` included).
//!
//! The command runs in a process group of its own. Beside it, in that
//! group, a watcher (a background subshell of `/bin/sh`) holds the read
//! end of a pipe whose write end only idem holds: the [`Lifeline`]. When
//! the pipe closes, because idem dropped it or because the kernel closed
//! it with the rest of a killed idem, the watcher's read returns and it
//! kills the whole group. The command's leader also has `PR_SET_PDEATHSIG`,
//! so it is killed with idem's thread even before the watcher runs.
//!
//! The limit: a process that leaves the group (`setsid`, `setpgid`, a
//! daemon that double-forks into its own session) is no longer the
//! group's, and nothing here follows it.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `/bin/sh -c` this, then the command's program and arguments: the
/// watcher goes to the background with fd 3 (the lifeline's read end)
/// and no other descriptor of the command's (so a pipe idem reads from
/// the command reaches its end when the command's own processes close
/// it), ignores the signals a terminal sends, and kills the group when
/// fd 3 closes; the command runs without fd 3.
const WATCHED: &str = "(trap '' INT TERM HUP QUIT; read _ <&3; kill -KILL 0) \
                       </dev/null >/dev/null 2>&1 & exec 3<&- \"$@\"";

/// A command set up to run under a watcher, not yet started: give it its
/// environment and its standard streams with [`Watched::command`], then
/// [`Watched::spawn`] it.
pub struct Watched {
    command: tokio::process::Command,
    watch: OwnedFd,
    lifeline: OwnedFd,
}

/// The write end of a started command's lifeline: dropped, the command's
/// whole group is killed by its watcher.
pub struct Lifeline(#[allow(dead_code)] OwnedFd);

impl Watched {
    /// `program` with `args`, under a watcher; `name` is the shell's `$0`
    /// (seen in `ps`, e.g. `idem-db`).
    pub fn new<I, S>(name: &str, program: impl AsRef<OsStr>, args: I) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (watch, lifeline) = pipe()?;
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(WATCHED)
            .arg(name)
            .arg(program)
            .args(args)
            .process_group(0)
            .kill_on_drop(true);
        let watch_fd = watch.as_raw_fd();
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (dup2, prctl, getppid).
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(watch_fd, 3) < 0
                    || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // idem died between fork and prctl: nothing would kill us.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("idem is gone"));
                }
                Ok(())
            });
        }
        Ok(Self {
            command,
            watch,
            lifeline,
        })
    }

    /// The command, for its environment and standard streams.
    pub fn command(&mut self) -> &mut tokio::process::Command {
        &mut self.command
    }

    /// Starts it; the child's id is its group's.
    pub fn spawn(mut self) -> std::io::Result<(tokio::process::Child, Lifeline)> {
        let child = self.command.spawn()?;
        drop(self.watch);
        Ok((child, Lifeline(self.lifeline)))
    }
}

/// A pipe whose two ends close on exec (fd 3 is the one made to survive).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it opens.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
