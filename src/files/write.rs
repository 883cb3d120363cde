//! The one way idem writes a file (the timeline, the trace, the progress, completions and man pages, exercises, scripts for its own programs): made whole beside the target, then renamed into place; never through a link, never into a FIFO or device.
//!
//! Every writer goes through here: [`replace`] for a file idem may write
//! again (a report, the progress), [`create_new`] for one it must never
//! write over (an exercise handed to a learner), [`append`] for a file
//! others add to as well (a CI system's summary), and [`make_dirs`] for
//! the directories they go in.
//!
//! These files often land in shared places such as `/tmp`, where anyone
//! can plant a link named like the file a root user is about to write, or
//! swap a directory on the way for a link while a race runs. So:
//! - the target's directory is opened once, component by component, and
//!   every step after it is made relative to that open directory
//!   (`openat`, `renameat`, `unlinkat`): what is written is where the
//!   directory was when it was opened, whatever is renamed meanwhile. A
//!   component that is a symbolic link is followed only when the link
//!   belongs to root or to this user (such as `/var/run`); anyone else's is
//!   refused, and every other component is opened with `O_NOFOLLOW`;
//! - the target is looked at without following links and refused unless
//!   it is missing or a regular file;
//! - the contents go to a new file in the same directory, created
//!   exclusively (so it cannot be a planted link either) under a name of a
//!   fixed length whatever the target's (a 255-byte name is fine), are
//!   synced, and the new file is renamed over the target. `renameat`
//!   replaces the name itself and never follows a link there, and a run
//!   killed mid-write leaves the previous file as it was: only a stray
//!   staged file, which the next write to the same target removes.

use std::ffi::{CStr, CString, OsStr};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The directory a target is written in, open, and the target's name in it.
struct Place {
    dir: OwnedFd,
    name: CString,
}

impl Place {
    /// Opens `path`'s directory (see the module's notes) and checks the
    /// target: missing, or a regular file.
    fn open(path: &Path, flag: &str) -> Result<Self> {
        let shown = path.display();
        let Some(name) = path.file_name() else {
            bail!("{flag} {shown}: give a file name");
        };
        let name = c_name(name).with_context(|| format!("{flag} {shown}: the name holds a NUL"))?;
        let parent = path.parent().unwrap_or(Path::new(""));
        let dir = open_dir(parent, None).map_err(|why| anyhow::anyhow!("{flag} {shown}: {why}"))?;
        let place = Self { dir, name };
        place.check(flag, path)?;
        Ok(place)
    }

    /// Refuses a target that is a link, a directory, a FIFO, a socket or a
    /// device; a missing file or a regular one is fine.
    fn check(&self, flag: &str, path: &Path) -> Result<()> {
        let shown = path.display();
        let kind = match stat_at(&self.dir, &self.name) {
            Ok(Some((mode, _))) => mode & libc::S_IFMT,
            Ok(None) => return Ok(()),
            Err(err) => bail!("{flag} {shown}: cannot look at it: {err}"),
        };
        match kind {
            libc::S_IFREG => Ok(()),
            libc::S_IFLNK => bail!(
                "{flag} {shown} is a symbolic link; idem does not write through links: name the file itself"
            ),
            libc::S_IFDIR => bail!("{flag} {shown} is a directory; name a file in it"),
            _ => bail!(
                "{flag} {shown} is not a regular file (a FIFO, socket or device); name a file"
            ),
        }
    }
}

/// Refuses a target that idem would not write (see the module's notes), so
/// that a run can be refused before it starts. `flag` names the setting.
pub fn check_target(path: &Path, flag: &str) -> Result<()> {
    Place::open(path, flag).map(drop)
}

/// Writes `contents` to `path` whole or not at all (see the module's doc).
pub fn replace(path: &Path, contents: &[u8], flag: &str) -> Result<()> {
    Staged::write(path, contents, flag)?.commit()
}

/// Adds `contents` at the end of `path` (a CI system's summary file, which
/// others write too), creating it if missing: never through a link (the
/// name is opened with `O_NOFOLLOW` in its open directory), never waiting
/// on a FIFO (opened non-blocking, then refused unless a regular file).
pub fn append(path: &Path, contents: &[u8], what: &str) -> Result<()> {
    let place = Place::open(path, what)?;
    let shown = path.display();
    let flags = libc::O_APPEND | libc::O_CREAT | libc::O_NONBLOCK;
    let mut file = open_at(&place.dir, &place.name, flags)
        .map_err(|err| anyhow::anyhow!("could not write {what} {shown}: {err}"))?;
    if !file.metadata()?.file_type().is_file() {
        bail!("{what} {shown} is not a regular file (a FIFO, socket or device); name a file");
    }
    file.write_all(contents)
        .with_context(|| format!("could not write {what} {shown}"))
}

/// Writes `contents` to `path`, a name where nothing is yet, whole or not
/// at all: anything there (a file, a link, even a dangling one, a FIFO) is
/// left as it is and refused with `Ok(false)`. `what` names the file in a
/// message.
pub fn create_new(path: &Path, contents: &[u8], what: &str) -> Result<bool> {
    let staged = Staged::write(path, contents, what)?;
    let dir = staged.place.dir.as_raw_fd();
    // SAFETY: both names are C strings in the one open directory.
    let renamed = unsafe {
        libc::renameat2(
            dir,
            staged.staged.as_ptr(),
            dir,
            staged.place.name.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if renamed != 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == ErrorKind::AlreadyExists {
            return Ok(false);
        }
        bail!("could not write {what} {}: {err}", path.display());
    }
    // SAFETY: syncs the open directory.
    unsafe {
        libc::fsync(dir);
    }
    Ok(true)
}

/// Makes `dir` and whatever of it is missing, each new directory with
/// `mode` (less the umask), opened as the writers open theirs: a link on
/// the way is followed only when it is root's or this user's. `what`
/// names the directory in a message.
pub fn make_dirs(dir: &Path, mode: libc::mode_t, what: &str) -> Result<()> {
    open_dir(dir, Some(mode))
        .map(drop)
        .map_err(|why| anyhow::anyhow!("{what} {}: {why}", dir.display()))
}

/// `name` in the open directory `dir`, opened for writing with `flags`
/// besides `O_NOFOLLOW` and `O_CLOEXEC` (a link there is never followed).
fn open_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> std::io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | flags;
    // SAFETY: a C string in an open directory; the descriptor returned is
    // owned by the File from here on.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned here alone.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The contents, written and synced beside the target under a name of
/// their own; the target is untouched until [`Staged::commit`]. Dropped
/// uncommitted, the staged file is removed.
struct Staged {
    place: Place,
    staged: CString,
    target: String,
    flag: String,
}

impl Staged {
    fn write(path: &Path, contents: &[u8], flag: &str) -> Result<Self> {
        let place = Place::open(path, flag)?;
        let prefix = staged_prefix(place.name.to_bytes());
        sweep_stale(&place.dir, &prefix);
        let staged = CString::new(format!(
            "{prefix}{}-{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ))
        .expect("a staged name has no NUL");
        let staged = Self {
            place,
            staged,
            target: path.display().to_string(),
            flag: flag.to_owned(),
        };
        let written = (|| {
            let flags = libc::O_CREAT | libc::O_EXCL;
            let mut file = open_at(&staged.place.dir, &staged.staged, flags)?;
            file.write_all(contents)?;
            file.sync_all()
        })();
        written.with_context(|| format!("could not write {flag} {}", staged.target))?;
        Ok(staged)
    }

    /// Renames the staged file over the target: from here on the target is
    /// the new contents, whole.
    fn commit(self) -> Result<()> {
        let dir = self.place.dir.as_raw_fd();
        // SAFETY: both names are C strings in the one open directory.
        let renamed =
            unsafe { libc::renameat(dir, self.staged.as_ptr(), dir, self.place.name.as_ptr()) };
        if renamed != 0 {
            let err = std::io::Error::last_os_error();
            bail!("could not write {} {}: {err}", self.flag, self.target);
        }
        // The rename is durable once the directory is synced; a failure here
        // leaves a written file, so it is not reported.
        // SAFETY: syncs the open directory.
        unsafe {
            libc::fsync(dir);
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // After a commit the staged name is gone already.
        // SAFETY: a C string in the open directory.
        unsafe {
            libc::unlinkat(self.place.dir.as_raw_fd(), self.staged.as_ptr(), 0);
        }
    }
}

/// `.idem-<16 hex digits of the name's hash>-`: how the staged copies of
/// a target begin (then a pid), the same length whatever the target's name.
fn staged_prefix(name: &[u8]) -> String {
    let hash = Sha256::digest(name);
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(".idem-{hex}-")
}

fn c_name(name: &OsStr) -> Option<CString> {
    CString::new(name.as_bytes()).ok()
}

/// Opens `dir` one component at a time (see the module's notes); with
/// `create`, a missing component is made with that mode first.
fn open_dir(dir: &Path, create: Option<libc::mode_t>) -> std::result::Result<OwnedFd, String> {
    let start: &CStr = if dir.is_absolute() { c"/" } else { c"." };
    // SAFETY: a C string; the descriptor is owned from here on.
    let mut at = owned(unsafe {
        libc::open(
            start.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })
    .map_err(|e| format!("cannot open {}: {e}", start.to_string_lossy()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for component in dir.components() {
        let name = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::ParentDir => c"..".to_owned(),
            Component::Normal(name) => c_name(name).ok_or("a directory name holds a NUL")?,
            Component::Prefix(_) => return Err("a path prefix is not a Unix path".into()),
        };
        let shown = name.to_string_lossy().into_owned();
        let mut flags = libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        if let Some(mode) = create
            && lstat_at(&at, &name).is_none()
        {
            // SAFETY: a C string in an open directory. Made by someone
            // else meanwhile is as good: it is opened and checked below.
            let made = unsafe { libc::mkdirat(at.as_raw_fd(), name.as_ptr(), mode) };
            let err = std::io::Error::last_os_error();
            if made != 0 && err.kind() != ErrorKind::AlreadyExists {
                return Err(format!("cannot make the directory {shown:?}: {err}"));
            }
        }
        if let Some((mode, owner)) = lstat_at(&at, &name)
            && mode & libc::S_IFMT == libc::S_IFLNK
        {
            if owner != 0 && owner != me {
                return Err(format!(
                    "the directory {shown:?} on the way is a symbolic link of another user's; \
                     idem does not write through links: name the directory itself"
                ));
            }
            flags &= !libc::O_NOFOLLOW;
        }
        // SAFETY: a C string in an open directory; the result is owned.
        at = owned(unsafe { libc::openat(at.as_raw_fd(), name.as_ptr(), flags) }).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ELOOP) => format!(
                    "the directory {shown:?} on the way became a symbolic link; idem does not write through links"
                ),
                Some(libc::ENOTDIR) => format!("{shown:?} on the way is not a directory"),
                _ => format!("cannot open the directory {shown:?}: {e}"),
            }
        })?;
    }
    Ok(at)
}

fn owned(fd: libc::c_int) -> std::io::Result<OwnedFd> {
    match fd {
        fd if fd < 0 => Err(std::io::Error::last_os_error()),
        // SAFETY: a descriptor just opened and owned by no one else.
        fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
    }
}

/// `name`'s mode and owner in `dir`, links not followed: `None` when it
/// is missing.
fn stat_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<Option<(libc::mode_t, libc::uid_t)>> {
    // SAFETY: an all-zero stat is valid; fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a C string in an open directory.
    let done = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done == 0 {
        return Ok(Some((st.st_mode, st.st_uid)));
    }
    let err = std::io::Error::last_os_error();
    match err.kind() {
        ErrorKind::NotFound => Ok(None),
        _ => Err(err),
    }
}

/// [`stat_at`], with an error taken as nothing there.
fn lstat_at(dir: &OwnedFd, name: &CStr) -> Option<(libc::mode_t, libc::uid_t)> {
    stat_at(dir, name).ok().flatten()
}

/// Removes staged copies (names beginning `prefix`) that a killed idem of
/// this user left: ours by name, owner and a writer process that is gone.
fn sweep_stale(dir: &OwnedFd, prefix: &str) {
    let Ok(entries) = fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest
            .strip_suffix(".tmp")
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Some(name) = c_name(&file_name) else {
            continue;
        };
        let ours = lstat_at(dir, &name)
            .is_some_and(|(mode, owner)| mode & libc::S_IFMT == libc::S_IFREG && owner == me);
        if ours && !super::owners::alive(pid) {
            // SAFETY: a C string in the open directory.
            unsafe {
                libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
    fn a_new_file_is_never_written_over_anything() {
        let dir = scratch("create-new");
        let target = dir.join("exercise.toml");
        assert!(create_new(&target, b"first", "the exercise").unwrap());
        assert!(!create_new(&target, b"second", "the exercise").unwrap());
        assert_eq!(fs::read_to_string(&target).unwrap(), "first");
        let dangling = dir.join("dangling.toml");
        std::os::unix::fs::symlink(dir.join("made-through-the-link"), &dangling).unwrap();
        // Refused as a link before anything is staged.
        assert!(!matches!(
            create_new(&dangling, b"x", "the exercise"),
            Ok(true)
        ));
        assert!(!dir.join("made-through-the-link").exists());
        let names: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "no staged copy is left");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn directories_are_made_with_their_mode_and_a_file_on_the_way_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("make-dirs");
        let deep = dir.join("a").join("b").join("c");
        make_dirs(&deep, 0o700, "the state").unwrap();
        let mode = fs::metadata(&deep).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        make_dirs(&deep, 0o700, "the state").unwrap();
        fs::write(dir.join("file"), "x").unwrap();
        let err = make_dirs(&dir.join("file").join("d"), 0o700, "--dir").unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
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
        let left = dir.join(staged.staged.to_str().unwrap());
        std::mem::forget(staged);
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "the previous good page"
        );
        // The next write of a killed run's target sweeps what it left.
        let dead = dir.join(format!("{}4194305-abc.tmp", staged_prefix(b"page.html")));
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
        let stale = dir.join(format!("{}4194305-abc.tmp", staged_prefix(b"t.html")));
        fs::write(&stale, "half").unwrap();
        let other = dir.join(format!("{}4194305-abc.tmp", staged_prefix(b"other.html")));
        fs::write(&other, "not ours to judge").unwrap();
        replace(&target, b"page", "--timeline").unwrap();
        assert!(!stale.exists());
        assert!(other.exists(), "another target's staged file is left alone");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_name_of_255_bytes_is_written() {
        let dir = scratch("long-name");
        let target = dir.join("a".repeat(250) + ".html");
        replace(&target, b"page", "--timeline").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "page");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_directory_swapped_for_a_link_is_not_written_through() {
        let dir = scratch("swapped");
        let real = dir.join("real");
        fs::create_dir(&real).unwrap();
        let elsewhere = dir.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        // A link of this user's own on the way is followed (as /var/run is).
        let own = dir.join("own-link");
        std::os::unix::fs::symlink(&real, &own).unwrap();
        replace(&own.join("page.html"), b"page", "--timeline").unwrap();
        assert_eq!(fs::read_to_string(real.join("page.html")).unwrap(), "page");
        // Swapped between the open and the write: the file lands in the
        // directory that was opened, never where the link now points.
        let target = real.join("late.html");
        let staged = Staged::write(&target, b"late", "--timeline").unwrap();
        fs::rename(&real, dir.join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &real).unwrap();
        staged.commit().unwrap();
        assert!(!elsewhere.join("late.html").exists());
        assert_eq!(
            fs::read_to_string(dir.join("moved").join("late.html")).unwrap(),
            "late"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
