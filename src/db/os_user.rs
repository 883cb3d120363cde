//! Which operating-system user runs the disposable cluster.
//!
//! `initdb` and `postgres` refuse to run as root. When idem itself runs as
//! root (as CI does), the cluster runs as an unprivileged user instead: the
//! `postgres` system user that PostgreSQL's packages create, or `--pg-user`.

use std::ffi::CString;
use std::os::unix::fs::lchown;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// A user the cluster's processes switch to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsUser {
    pub uid: u32,
    pub gid: u32,
}

/// Decides who runs the cluster: `None` means "this process's own user".
pub fn cluster_user(requested: Option<&str>) -> Result<Option<OsUser>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    match (root, requested) {
        (false, None) => Ok(None),
        (false, Some(name)) => {
            let user = lookup(name)?
                .with_context(|| format!("--pg-user {name}: no such user on this machine"))?;
            // SAFETY: as above.
            if user.uid != unsafe { libc::geteuid() } {
                bail!("--pg-user {name} needs idem to run as root (it switches users)");
            }
            Ok(None)
        }
        (true, Some(name)) => {
            let user = lookup(name)?
                .with_context(|| format!("--pg-user {name}: no such user on this machine"))?;
            if user.uid == 0 {
                bail!("--pg-user {name} is root, and PostgreSQL refuses to run as root");
            }
            Ok(Some(user))
        }
        (true, None) => match lookup("postgres")? {
            Some(user) if user.uid != 0 => Ok(Some(user)),
            _ => bail!(
                "idem runs as root and PostgreSQL refuses to; there is no `postgres` user to run \
                 it as: pass --pg-user NAME (an unprivileged user) or --database-url"
            ),
        },
    }
}

/// Who runs another server idem starts (`mysql` for MariaDB): idem's own
/// user, or when idem runs as root, the unprivileged system user `name`
/// that the server's package creates.
pub fn server_user(name: &str, server: &str) -> Result<Option<OsUser>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    match lookup(name)? {
        Some(user) if user.uid != 0 => Ok(Some(user)),
        _ => bail!(
            "idem runs as root and will not run {server} as root; there is no unprivileged \
             `{name}` user to run it as (its package makes one)"
        ),
    }
}

/// Hands a whole tree to `user`, so that PostgreSQL may own its data directory.
pub fn chown_tree(path: &Path, user: OsUser) -> Result<()> {
    lchown(path, Some(user.uid), Some(user.gid))
        .with_context(|| format!("could not hand {} to the cluster's user", path.display()))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), user)?;
        }
    }
    Ok(())
}

fn lookup(name: &str) -> Result<Option<OsUser>> {
    let c_name = CString::new(name).context("a user name cannot contain a NUL byte")?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value for getpwnam_r to fill in.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the duration of the call, and buf's
    // length is passed along with it.
    let rc = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 {
        bail!(
            "could not look up user {name}: {}",
            std::io::Error::from_raw_os_error(rc)
        );
    }
    if result.is_null() {
        return Ok(None);
    }
    Ok(Some(OsUser {
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    }))
}
