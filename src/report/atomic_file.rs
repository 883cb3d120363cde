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
    Staged::write(path, contents, flag)?.commit()
}

/// The contents, written and synced beside the target under a name of
/// their own; the target is untouched until [`Staged::commit`]. Dropped
/// uncommitted, the staged file is removed.
struct Staged {
    staged: PathBuf,
    target: PathBuf,
    dir: PathBuf,
    flag: String,
}

impl Staged {
    fn write(path: &Path, contents: &[u8], flag: &str) -> Result<Self> {
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
        let staged = Self {
            staged: dir.join(format!(
                "{}{}-{}.tmp",
                staged_prefix(name),
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            )),
            target: path.to_path_buf(),
            dir,
            flag: flag.to_owned(),
        };
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&staged.staged)?;
            file.write_all(contents)?;
            file.sync_all()
        })();
        written.with_context(|| format!("could not write {flag} {shown}"))?;
        Ok(staged)
    }

    /// Renames the staged file over the target: from here on the target is
    /// the new contents, whole.
    fn commit(self) -> Result<()> {
        fs::rename(&self.staged, &self.target)
            .with_context(|| format!("could not write {} {}", self.flag, self.target.display()))?;
        // The rename is durable once the directory is synced; a failure here
        // leaves a written file, so it is not reported.
        if let Ok(dir) = fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // After a commit the staged name is gone already.
        let _ = fs::remove_file(&self.staged);
    }
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
    fn a_write_killed_before_its_rename_leaves_the_old_file_whole() {
        let dir = scratch("killed");
        let target = dir.join("page.html");
        fs::write(&target, "the previous good page").unwrap();
        // A kill can land only before the rename (this) or after it.
        let staged = Staged::write(&target, &vec![b'x'; 10 << 20], "--timeline").unwrap();
        let left = staged.staged.clone();
        std::mem::forget(staged);
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "the previous good page"
        );
        // The next write of a killed run's target sweeps what it left.
        let dead = dir.join(format!("{}4194305-abc.tmp", staged_prefix("page.html")));
        fs::rename(&left, &dead).unwrap();
        replace(&target, b"new", "--timeline").unwrap();
        assert!(!dead.exists());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
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
