//! A strategy written as a file: one of the course's shapes, with the SQL of each step in TOML.
//!
//! A learner's exercise and a practitioner's own guard are the same thing:
//! a shape (find-then-store, or claim-work-complete) and the statement each
//! of its steps sends, with named parameters (`$key`, `$fingerprint`, ...).
//! idem races it as it races its own strategies: the same tables, the
//! same trace with the file's SQL beside each step, the same JSON.
//!
//! The work itself (the service call and the XP row) stays idem's: what a
//! file says is how the key is found, claimed, stored and completed.
//!
//! A file is read once per process and kept for the process's life, so its
//! statements are `'static` as the course's are, and the trace, the
//! statement cache and the schema's qualified texts take them alike.

mod file;
mod named;
pub mod on_mariadb;
mod read;
mod run;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::Result;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use file::{Dialect, GuardFile, RefusedCommit, Shape, Statement, StepName};
pub use named::Param;
pub use run::{FileGuard, step_limit};

/// The most a guard file may hold.
pub const MAX_GUARD_FILE_BYTES: u64 = 64 * 1024;

/// A strategy as a report names it: its name, or a guard file's with the
/// shape it takes (`guard.toml (claim-work-complete shape)`).
pub fn label(kind: crate::strategy::StrategyKind, file: Option<&str>) -> String {
    match file {
        Some(file) => format!("{file} ({kind} shape)"),
        None => kind.name().to_string(),
    }
}

/// The guard file at `path`, read once per process: a second call for the
/// same path returns the first's.
pub fn load(path: &Path) -> Result<GuardRef> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, GuardRef>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Default::default);
    if let Some(file) = loaded.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
        return Ok(*file);
    }
    let text = crate::files::read_text(path, MAX_GUARD_FILE_BYTES, "guard file")?;
    let name = path.display().to_string();
    let file = GuardRef(Box::leak(Box::new(read::parse(&name, &text)?)));
    loaded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_path_buf(), file);
    Ok(file)
}

/// A guard file read for this process, as the race's settings carry it.
/// An app replica is sent its name and text, and reads it again.
#[derive(Debug, Clone, Copy)]
pub struct GuardRef(pub &'static GuardFile);

impl std::ops::Deref for GuardRef {
    type Target = GuardFile;
    fn deref(&self) -> &GuardFile {
        self.0
    }
}

#[derive(Serialize, Deserialize)]
struct Sent {
    name: String,
    source: String,
}

impl Serialize for GuardRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Sent {
            name: self.name.clone(),
            source: self.source.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for GuardRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sent = Sent::deserialize(d)?;
        let file = read::parse(&sent.name, &sent.source).map_err(serde::de::Error::custom)?;
        Ok(GuardRef(Box::leak(Box::new(file))))
    }
}
