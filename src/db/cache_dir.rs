//! Where idem keeps what outlives a run (the initdb templates, the remembered server versions): one directory, chosen once.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// Where idem keeps its templates: `IDEM_CACHE_DIR`, else the user's cache
/// directory; with no home at all, a directory of this user's own in the
/// temporary directory, which must be this user's and private.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("IDEM_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("idem"));
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(home).join(".cache").join("idem"));
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = std::env::temp_dir().join(format!("idem-cache-{uid}"));
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => {
            return Err(err).with_context(|| format!("could not create {}", dir.display()));
        }
    }
    let meta = fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "{} is not a private directory of this user's; set IDEM_CACHE_DIR or HOME",
            dir.display()
        );
    }
    Ok(dir)
}
