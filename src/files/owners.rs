//! Whether the process a file or directory was made by still runs: idem names what it may leave behind after its pid (run directories, staged copies), and removes only what a gone process left.

/// True while the process runs (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        return !matches!(state, Some('Z' | 'X'));
    }
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}
