//! PostgreSQL's POSIX shared-memory segments (`/dev/shm/PostgreSQL.*`): the one thing a killed `initdb` can leave outside any directory idem owns.
//!
//! idem's servers use `dynamic_shared_memory_type = mmap`, so their
//! segments live in their data directories. `initdb`'s own short-lived
//! backends use PostgreSQL's default, POSIX segments, and one killed at the
//! wrong moment leaves its segment behind. A segment is an orphan when it
//! was made after a moment the caller names and no process maps it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::SystemTime;

/// When this test binary began: the suite's check counts only what it made.
pub static SUITE_BEGAN: std::sync::LazyLock<SystemTime> = std::sync::LazyLock::new(SystemTime::now);

/// Segments made since `since` that no process has mapped.
pub fn orphans_since(since: SystemTime) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    let mapped = mapped();
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("PostgreSQL."))
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since)
        })
        .map(|e| e.path())
        .filter(|p| !mapped.contains(p))
        .collect();
    found.sort();
    found
}

/// Removes the orphans made since `since`; returns them.
pub fn remove_orphans_since(since: SystemTime) -> Vec<PathBuf> {
    let found = orphans_since(since);
    for path in &found {
        let _ = std::fs::remove_file(path);
    }
    found
}

/// Every `/dev/shm` file some process maps now.
fn mapped() -> BTreeSet<PathBuf> {
    let mut mapped = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return mapped;
    };
    for process in procs.flatten() {
        let Ok(maps) = std::fs::read_to_string(process.path().join("maps")) else {
            continue;
        };
        for line in maps.lines() {
            if let Some(at) = line.find("/dev/shm/") {
                let path = line[at..].trim_end_matches(" (deleted)");
                mapped.insert(PathBuf::from(path));
            }
        }
    }
    mapped
}

/// At the end of the suite: the orphans the tests made. Under `CI` the
/// binary then exits 1 (after libtest's summary, so it names the cause);
/// elsewhere it says what it found.
pub extern "C" fn check_at_exit() {
    let found = orphans_since(*SUITE_BEGAN);
    if found.is_empty() {
        return;
    }
    let line = format!(
        "the tests left {} shared-memory segment(s) of PostgreSQL's: {}\n",
        found.len(),
        found
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // SAFETY: writes a valid buffer of its own length to fd 2; `_exit`
    // ends the process without running other exit handlers again.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
        if std::env::var_os("CI").is_some() {
            libc::_exit(1);
        }
    }
}
