//! The cached `initdb` template that every disposable cluster is copied from.
//!
//! `initdb` takes over a second; copying its result takes a tenth of that.
//! So idem runs `initdb` once per PostgreSQL version into a private staging
//! directory and renames the finished result into the cache. A rename is
//! atomic, so two first runs at once cannot leave a half-made template: the
//! loser of the rename throws its copy away.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::binaries::PgBinaries;
use super::child;
use super::leftovers;
use super::os_user::{OsUser, chown_tree};

/// Bumped whenever the initdb flags change, so an old template is not reused.
const LAYOUT: &str = "v2";

/// How long `initdb` may take (it takes 1–3 s on a laptop).
const INITDB_LIMIT: Duration = Duration::from_secs(120);

/// A ready template data directory.
#[derive(Debug, Clone)]
pub struct Template {
    pub dir: PathBuf,
    /// True when this call ran `initdb` (a cold start).
    pub made_now: bool,
}

/// Returns the cached template for these binaries, making it first if needed.
pub fn ensure(bins: &PgBinaries, user: Option<OsUser>, cache: &Path) -> Result<Template> {
    let dir = cache.join(format!("template-pg{}-{LAYOUT}", bins.version));
    // Half-made copies of killed runs, whether or not another run has
    // finished the template since.
    leftovers::sweep(cache, ".incoming");
    if dir.join("PG_VERSION").is_file() {
        return Ok(Template {
            dir,
            made_now: false,
        });
    }
    fs::create_dir_all(cache)
        .with_context(|| format!("could not create the cache directory {}", cache.display()))?;

    // initdb writes into a directory its own user owns, away from the cache
    // (as root, the cache lives in root's home, which that user cannot enter).
    let staging = private_dir(&std::env::temp_dir(), "idem-initdb")?;
    let result = run_initdb(bins, user, &staging).and_then(|data| {
        store(&data, &dir, ".incoming", |dir| {
            dir.join("PG_VERSION").is_file()
        })
    });
    let _ = fs::remove_dir_all(&staging);
    Ok(Template {
        dir,
        made_now: result?,
    })
}

fn run_initdb(bins: &PgBinaries, user: Option<OsUser>, staging: &Path) -> Result<PathBuf> {
    if let Some(user) = user {
        chown_tree(staging, user)?;
    }
    let data = staging.join("data");
    let mut cmd = Command::new(bins.initdb());
    cmd.arg("--pgdata")
        .arg(&data)
        .args(["--auth=trust", "--username=postgres", "--encoding=UTF8"])
        .args(["--locale=C", "--no-sync", "--no-instructions"])
        // 1 MB WAL segments instead of 16: the template, and so every copy of
        // it, is 16 MB smaller.
        .arg("--wal-segsize=1");
    if let Some(user) = user {
        cmd.uid(user.uid).gid(user.gid);
    }
    let initdb = bins.initdb().display().to_string();
    let output = child::output(&mut cmd, &initdb, INITDB_LIMIT)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        bail!("initdb failed: {}", last.trim());
    }
    if !data.join("PG_VERSION").is_file() {
        bail!(
            "{initdb} reported success but made no data directory in {}",
            data.display()
        );
    }
    Ok(data)
}

/// Copies a freshly made data directory `data` into the cache as `dir`,
/// through a copy named `<incoming>-<pid>-<random>` beside it and one
/// rename, so that no run ever sees half a template. True if this call
/// stored it; false if another run stored one first (`made` says whether
/// `dir` is a whole template), which is as good.
pub fn store(
    data: &Path,
    dir: &Path,
    incoming: &str,
    made: impl Fn(&Path) -> bool,
) -> Result<bool> {
    let cache = dir.parent().unwrap_or(Path::new("."));
    let incoming = cache.join(format!("{incoming}-{}-{}", std::process::id(), short_id()));
    copy_tree(data, &incoming)?;
    match fs::rename(&incoming, dir) {
        Ok(()) => Ok(true),
        Err(_) if made(dir) => {
            let _ = fs::remove_dir_all(&incoming);
            Ok(false)
        }
        Err(err) => {
            let _ = fs::remove_dir_all(&incoming);
            Err(err).with_context(|| format!("could not store the template in {}", dir.display()))
        }
    }
}

/// Creates a fresh directory only its owner may enter, named `<prefix>-<pid>-<random>`.
pub fn private_dir(parent: &Path, prefix: &str) -> Result<PathBuf> {
    let dir = parent.join(format!("{prefix}-{}-{}", std::process::id(), short_id()));
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir)
}

/// Copies a directory tree, keeping permission bits (PostgreSQL checks them).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let mode = fs::metadata(from)?.permissions().mode();
    fs::DirBuilder::new()
        .mode(mode & 0o777)
        .create(to)
        .with_context(|| format!("could not create {}", to.display()))?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            symlink(fs::read_link(&src)?, &dst)?;
        } else {
            fs::copy(&src, &dst).with_context(|| format!("could not copy {}", src.display()))?;
        }
    }
    Ok(())
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}
