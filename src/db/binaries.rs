//! Finding PostgreSQL's server binaries (`initdb`, `postgres`) on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The oldest PostgreSQL idem runs on: `pg_terminate_backend(pid, timeout)`,
/// which the fault demonstrations use, came with 14.
pub const MIN_SERVER_VERSION: u32 = 14;
use super::child;
use crate::files::write;

/// How long a program may take to say its version.
const ASK_LIMIT: Duration = Duration::from_secs(10);

/// The server binaries of one PostgreSQL installation.
#[derive(Debug, Clone)]
pub struct PgBinaries {
    pub dir: PathBuf,
    /// What `postgres --version` says, e.g. `15.18`.
    pub(crate) version: String,
}

impl PgBinaries {
    pub fn initdb(&self) -> PathBuf {
        self.dir.join("initdb")
    }

    pub fn postgres(&self) -> PathBuf {
        self.dir.join("postgres")
    }

    /// The major version, e.g. `15`: data directories are compatible within it.
    pub fn major(&self) -> &str {
        self.version.split('.').next().unwrap_or(&self.version)
    }

    /// Finds the binaries: an explicit directory if given, else the usual places.
    pub fn locate(explicit: Option<&Path>) -> Result<Self> {
        if let Some(dir) = explicit {
            if !has_server_binaries(dir) {
                bail!(
                    "no PostgreSQL server binaries (initdb, postgres) in {}; {}",
                    dir.display(),
                    INSTALL_HINT
                );
            }
            return Self::at(&installation(dir));
        }
        match candidates().find(|dir| has_server_binaries(dir)) {
            Some(dir) => Self::at(&installation(&dir)),
            None => bail!("no PostgreSQL server binaries (initdb, postgres) found; {INSTALL_HINT}"),
        }
    }

    fn at(dir: &Path) -> Result<Self> {
        let dir = dir.to_path_buf();
        let postgres = dir.join("postgres").display().to_string();
        // Asking `postgres --version` costs a process start on every run;
        // the answer is kept for this very file (same inode, size, mtime).
        let stamp = stamp(&dir.join("postgres"));
        if let Some(version) = stamp.as_deref().and_then(known_version) {
            return Self::checked(Self { dir, version });
        }
        let output = child::output(
            Command::new(&postgres).arg("--version"),
            &format!("{postgres} --version"),
            ASK_LIMIT,
        )?;
        let text = String::from_utf8_lossy(&output.stdout);
        // "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        let version = text
            .split_whitespace()
            .nth(2)
            .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .with_context(|| {
                format!(
                    "unexpected `{postgres} --version` output: {:?}",
                    text.trim()
                )
            })?
            .to_string();
        if let Some(stamp) = &stamp {
            remember_version(stamp, &version);
        }
        Self::checked(Self { dir, version })
    }

    /// Refuses a PostgreSQL older than idem supports.
    fn checked(bins: Self) -> Result<Self> {
        let postgres = bins.postgres().display().to_string();
        let major: u32 = bins.major().parse().unwrap_or(0);
        if major < MIN_SERVER_VERSION {
            bail!(
                "{postgres} is PostgreSQL {}; idem needs {MIN_SERVER_VERSION} or newer \
                 (point --pg-bin at a newer installation)",
                bins.version
            );
        }
        Ok(bins)
    }
}

/// The file the versions seen are kept in, in idem's cache directory.
const VERSIONS: &str = "postgres-versions";

/// The most of [`VERSIONS`] idem reads: a line per installation seen.
const MAX_VERSIONS_BYTES: u64 = 64 * 1024;

/// What identifies one binary file: its path, device, inode, size and
/// modification time. Any change to the file changes it.
fn stamp(file: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).ok()?;
    Some(format!(
        "{}\t{}\t{}\t{}\t{}.{}",
        file.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// The version kept for `stamp`, if any.
fn known_version(stamp: &str) -> Option<String> {
    let file = super::cache_dir::cache_dir().ok()?.join(VERSIONS);
    let text = crate::files::read_text(&file, MAX_VERSIONS_BYTES, "idem's cache").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(stamp)?.strip_prefix('\t'))
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_string)
}

/// Keeps `version` for `stamp` (best effort: a run without a cache just asks again).
fn remember_version(stamp: &str, version: &str) {
    let Ok(dir) = super::cache_dir::cache_dir() else {
        return;
    };
    if write::make_dirs(&dir, 0o700, "idem's cache").is_err() {
        return;
    }
    let file = dir.join(VERSIONS);
    let mut lines: Vec<String> = crate::files::read_text(&file, MAX_VERSIONS_BYTES, "idem's cache")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with(&format!("{}\t", stamp.split('\t').next().unwrap_or(""))))
        .map(str::to_string)
        .collect();
    lines.push(format!("{stamp}\t{version}"));
    let _ = write::replace(&file, (lines.join("\n") + "\n").as_bytes(), "idem's cache");
}

const INSTALL_HINT: &str = "install PostgreSQL (Debian/Ubuntu: `apt-get install postgresql`, \
macOS: `brew install postgresql@16`), point --pg-bin (or IDEM_PG_BIN) at its bin directory, \
or pass --database-url to use a running server";

/// The installation's own directory when `dir` only links to its binaries
/// (e.g. `/usr/local/bin/postgres -> /usr/lib/postgresql/15/bin/postgres`),
/// where its other programs (`pgbench`) live too. PostgreSQL itself finds
/// its files from the resolved path the same way.
fn installation(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir.join("postgres"))
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf))
        .filter(|real| has_server_binaries(real))
        .unwrap_or_else(|| dir.to_path_buf())
}

fn has_server_binaries(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("postgres").is_file()
}

/// Where PostgreSQL's server binaries usually live, in the order they are
/// tried. Looking in a directory costs a `stat`; asking `pg_config` costs
/// a process (on Debian a wrapper script that starts two more, about 50 ms,
/// a third of a whole `idem race`), so it is asked only when the plain
/// places have nothing: for installs that put only the client tools on
/// `PATH`, such as PGDG's packages on Red Hat (`/usr/pgsql-N/bin`).
fn candidates() -> impl Iterator<Item = PathBuf> {
    // On PATH: what the user chose (Homebrew, Postgres.app, custom builds).
    let path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    // Debian and Ubuntu keep each major version apart; the newest first,
    // as Debian's own pg_config wrapper picks.
    let debian = versioned_dirs(Path::new("/usr/lib/postgresql"), "bin");
    // pg_config knows where its own installation keeps them.
    let pg_config = std::iter::once_with(|| {
        child::output(
            Command::new("pg_config").arg("--bindir"),
            "pg_config --bindir",
            ASK_LIMIT,
        )
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
    .flatten();
    // Source builds' default, and Homebrew on Apple silicon and Intel.
    let elsewhere = std::iter::once_with(|| {
        let mut dirs = vec![PathBuf::from("/usr/local/pgsql/bin")];
        for prefix in ["/opt/homebrew/opt", "/usr/local/opt"] {
            dirs.extend(
                versioned_dirs(Path::new(prefix), "bin")
                    .into_iter()
                    .filter(|d| d.to_string_lossy().contains("postgresql")),
            );
        }
        dirs
    })
    .flatten();
    path.into_iter()
        .chain(debian)
        .chain(pg_config)
        .chain(elsewhere)
}

/// Subdirectories of `root` sorted by their numeric version, newest first, each joined with `leaf`.
fn versioned_dirs(root: &Path, leaf: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let number = name
                .rsplit(|c: char| !c.is_ascii_digit() && c != '.')
                .next()
                .and_then(|v| v.split('.').next()?.parse().ok())
                .unwrap_or(0);
            (number, e.path().join(leaf))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}
