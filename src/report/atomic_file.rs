//! Files idem writes for people to open (`--timeline`, `--trace-json`): made whole beside the target, then renamed over it; never through a link, never into a FIFO or device.
//!
//! These files often land in shared places such as `/tmp`, where anyone
//! can plant a link named like the file a root user is about to write.
//! So the target is looked at without following links and refused unless
//! it is missing or a regular file; the contents go to a new file in the
//! same directory (created exclusively, so it cannot be a planted link
//! either), are synced, and the new file is renamed over the target.
//! `rename` replaces the name itself and never follows a link there, and
//! a run killed mid-write leaves the previous file as it was: only a
//! stray temporary file, which the next write to the same target removes.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Refuses a target that is a link, a directory, a FIFO, a socket or a
/// device; a missing file or a regular one is fine. `flag` names the
/// setting that asked for the file, for the message.
pub fn check_target(path: &Path, flag: &str) -> Result<()> {
    let shown = path.display();
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
        Err(err) => bail!("{flag} {shown}: cannot look at it: {err}"),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        bail!(
            "{flag} {shown} is a symbolic link; idem does not write through links: name the file itself"
        );
    }
    if kind.is_dir() {
        bail!("{flag} {shown} is a directory; name a file in it");
    }
    if !kind.is_file() {
        bail!("{flag} {shown} is not a regular file (a FIFO, socket or device); name a file");
    }
    Ok(())
}

/// Writes `contents` to `path` whole or not at all (see the module's doc).
pub fn replace(path: &Path, contents: &[u8], flag: &str) -> Result<()> {
    check_target(path, flag)?;
    let shown = path.display();
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        bail!("{flag} {shown}: give a file name");
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    sweep_stale(&dir, name);
    let staged = dir.join(format!(
        "{}{}-{}.tmp",
        staged_prefix(name),
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&staged)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&staged, path)
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&staged);
        return Err(err).with_context(|| format!("could not write {flag} {shown}"));
    }
    // The rename is durable once the directory is synced; a failure here
    // leaves a written file, so it is not reported.
    if let Ok(dir) = fs::File::open(&dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// `.NAME.idem-`: how the staged copies of `NAME` begin (then a pid).
fn staged_prefix(name: &str) -> String {
    format!(".{name}.idem-")
}

/// Removes staged copies of `name` that a killed idem of this user left:
/// ours by name, owner and a writer process that is gone.
fn sweep_stale(dir: &Path, name: &str) {
    let prefix = staged_prefix(name);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest
            .strip_suffix(".tmp")
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = entry.metadata().is_ok_and(|m| m.is_file() && m.uid() == me);
        if ours && !crate::db::leftovers::alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "idem-atomic-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_link_is_refused_and_its_target_untouched() {
        let dir = scratch("link");
        let secret = dir.join("secret");
        fs::write(&secret, "keep me").unwrap();
        let planted = dir.join("report.html");
        std::os::unix::fs::symlink(&secret, &planted).unwrap();
        let err = replace(&planted, b"page", "--timeline").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(&secret).unwrap(), "keep me");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_is_replaced_whole_and_no_staged_copy_stays() {
        let dir = scratch("replace");
        let target = dir.join("trace.json");
        fs::write(&target, "old").unwrap();
        replace(&target, b"new", "--trace-json").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        let names: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "only the target is left");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_staged_copy_of_a_dead_writer_is_swept() {
        let dir = scratch("sweep");
        let target = dir.join("t.html");
        // No process has pid 2^22 + 1 (above Linux's pid_max default ceiling).
        let stale = dir.join(format!("{}4194305-abc.tmp", staged_prefix("t.html")));
        fs::write(&stale, "half").unwrap();
        let other = dir.join(".other.idem-4194305-abc.tmp");
        fs::write(&other, "not ours to judge").unwrap();
        replace(&target, b"page", "--timeline").unwrap();
        assert!(!stale.exists());
        assert!(other.exists(), "another target's staged file is left alone");
        fs::remove_dir_all(dir).unwrap();
    }
}
