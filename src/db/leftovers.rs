//! Directories left by idem processes that were killed before they could clean up.
//!
//! Every directory idem makes is named `<prefix>-<pid>-<random>`. The
//! supervisor removes a run directory however idem dies; what it cannot cover
//! is a first run killed while `initdb` builds the template. Before making
//! new ones, idem removes the directories whose process is gone.

use std::fs;
use std::path::Path;

use crate::files::owners::alive;

/// Removes `<parent>/<prefix>-<pid>-*` for every pid that no longer runs,
/// unless a live PostgreSQL still uses the directory.
pub fn sweep(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner(&name, prefix) else {
            continue;
        };
        let path = entry.path();
        if pid == std::process::id() || alive(pid) || server_running(&path) {
            continue;
        }
        let _ = fs::remove_dir_all(&path);
    }
}

/// The pid in `<prefix>-<pid>-<random>`, if the name has that shape.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (pid, random) = rest.split_once('-')?;
    if random.len() != 8 || !random.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a server still runs in `dir`: PostgreSQL's `data/postmaster.pid`
/// or MariaDB's `mariadb.pid` names a live process.
fn server_running(dir: &Path) -> bool {
    [
        dir.join("data").join("postmaster.pid"),
        dir.join("mariadb.pid"),
    ]
    .iter()
    .filter_map(|pid_file| fs::read_to_string(pid_file).ok())
    .filter_map(|text| text.lines().next()?.trim().parse::<u32>().ok())
    .any(alive)
}

#[cfg(test)]
mod tests {
    use super::owner;

    #[test]
    fn only_idem_names_have_an_owner() {
        assert_eq!(owner("idem-1234-0a1b2c3d", "idem"), Some(1234));
        assert_eq!(owner("idem-initdb-99-0a1b2c3d", "idem-initdb"), Some(99));
        assert_eq!(owner("idem-initdb-99-0a1b2c3d", "idem"), None);
        assert_eq!(owner("idem-test-x-1", "idem"), None);
        assert_eq!(owner("idempotent", "idem"), None);
    }
}
