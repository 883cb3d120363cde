//! A child run to its end with its own peak memory, for the tests that bound it.

use std::io::Read;
use std::process::{Command, Stdio};

/// Runs `command` to its end and returns its output with its peak memory
/// in kilobytes: the most `VmHWM` (the resident high-water mark of the
/// program's own address space, begun at its exec) read while it ran.
/// Not wait4's `ru_maxrss`: that also keeps the high-water mark of the
/// address space the child had before its exec, a copy of this test
/// process, which in a full suite run is well over 100 MiB by itself.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its peak memory"
)]
pub fn run_measured(mut command: Command) -> (std::process::Output, i64) {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // Read until the program has exited (a zombie has no VmHWM); the pid
    // stays ours until wait4 below reaps it.
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while let Some(kb) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
                line.split_whitespace().nth(1)?.parse::<i64>().ok()
            })
        {
            peak = peak.max(kb);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        peak
    });
    let (mut out, mut err) = (child.stdout.unwrap(), child.stderr.unwrap());
    let reader = std::thread::spawn(move || {
        let mut stdout = Vec::new();
        let _ = out.read_to_end(&mut stdout);
        stdout
    });
    let mut stderr = Vec::new();
    let _ = err.read_to_end(&mut stderr);
    let stdout = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid, and wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    let output = std::process::Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout,
        stderr,
    };
    let _ = usage;
    (output, sampler.join().unwrap())
}
