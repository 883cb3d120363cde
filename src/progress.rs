//! What a learner has done, kept between runs: the lessons told to their end, in a small file under the user's state directory.
//!
//! The file is `$XDG_STATE_HOME/idem/progress.toml`, or
//! `~/.local/state/idem/progress.toml` without that variable; with neither
//! variable set nothing is kept. It is read as a regular file of at most
//! [`MAX_BYTES`], and a file idem cannot read as its own is left alone and
//! counts as no progress: idem never overwrites what it did not write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The most of the file idem reads.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The lessons read, as saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// Lessons told to their end (`idem lesson N`, the tour).
    #[serde(default)]
    pub lessons_read: BTreeSet<u8>,
    /// Exercises whose file passed `idem check`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub exercises_passed: BTreeSet<u8>,
    /// Hints seen, by lesson (TOML keys are text: `"1" = 2`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hints_seen: BTreeMap<String, u8>,
}

/// Where the progress is kept, if anywhere.
pub fn path() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".local").join("state"))
        })?;
    Some(state.join("idem").join("progress.toml"))
}

impl Progress {
    /// The saved progress; none if there is no file. `Err` if a file is
    /// there and is not one idem can read as its own.
    pub fn load() -> Result<Self> {
        let Some(path) = path() else {
            return Ok(Self::default());
        };
        if !path.exists() {
            return Ok(Self::default());
        }
        let bytes = crate::files::read_regular(&path, MAX_BYTES, "the progress file")?;
        let text =
            String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
        toml::from_str(&text).map_err(|err| {
            anyhow::anyhow!(
                "{} is not idem's progress ({}); move it away or remove it",
                path.display(),
                err.message().trim_end_matches('.')
            )
        })
    }

    /// Lesson `number` was told to its end: saved, if progress is kept and
    /// the file there is idem's own. Says why not in one line on stderr.
    pub fn read(number: u8) {
        Self::update(|p| p.lessons_read.insert(number));
    }

    /// Lesson `number`'s exercise passed `idem check`: saved as [`Progress::read`] saves.
    pub fn passed(number: u8) {
        Self::update(|p| p.exercises_passed.insert(number));
    }

    /// The hints of lesson `number` seen so far.
    pub fn hints(&self, number: u8) -> u8 {
        self.hints_seen
            .get(&number.to_string())
            .copied()
            .unwrap_or(0)
    }

    /// Lesson `number`'s hints seen so far are now `seen`: saved as [`Progress::read`] saves.
    pub fn saw_hints(number: u8, seen: u8) {
        Self::update(|p| p.hints_seen.insert(number.to_string(), seen) != Some(seen));
    }

    /// Changes the saved progress with `change`, which says whether it
    /// changed anything; saved if it did. Says why not in one line on stderr.
    fn update(change: impl FnOnce(&mut Self) -> bool) {
        let saved = Self::load().and_then(|mut progress| {
            if change(&mut progress) {
                progress.save()?;
            }
            Ok(())
        });
        if let Err(err) = saved {
            eprintln!("note: progress not saved: {err:#}");
        }
    }

    /// Writes the progress whole, through a file beside it.
    fn save(&self) -> Result<()> {
        let Some(path) = path() else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not make {}", dir.display()))?;
        }
        let text = toml::to_string(self).context("could not write the progress")?;
        let beside = path.with_extension("toml.new");
        std::fs::write(&beside, text)
            .with_context(|| format!("could not write {}", beside.display()))?;
        std::fs::rename(&beside, &path)
            .with_context(|| format!("could not write {}", path.display()))?;
        Ok(())
    }

    /// Forgets everything: removes the file, if it is idem's own.
    pub fn reset() -> Result<Option<PathBuf>> {
        let Some(path) = path() else {
            return Ok(None);
        };
        if !path.exists() {
            return Ok(None);
        }
        // Read first: a file idem cannot read as its own stays.
        Self::load()?;
        std::fs::remove_file(&path)
            .with_context(|| format!("could not remove {}", path.display()))?;
        Ok(Some(path))
    }

    /// The first lesson not read yet, if any.
    pub fn next(&self, lessons: u8) -> Option<u8> {
        (1..=lessons).find(|n| !self.lessons_read.contains(n))
    }
}
