//! What a learner has done, kept between runs: the lessons told to their end, in a small file under the user's state directory.
//!
//! The file is `$XDG_STATE_HOME/idem/progress.toml`, or
//! `~/.local/state/idem/progress.toml` without that variable. As the XDG
//! base directory specification says, a relative `XDG_STATE_HOME` is
//! ignored; a `HOME` that is not an absolute path to a directory that
//! exists keeps nothing (idem makes `.local/state/idem` inside a home,
//! never the home itself). It is read as a regular file of at most
//! [`MAX_BYTES`], written through idem's one safe writer
//! ([`crate::files::write`]: no link followed, no FIFO waited on), and a
//! file idem cannot read as its own (another shape, a lesson that does not
//! exist) is left alone and counts as no progress: idem never overwrites
//! what it did not write.

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
    /// Predictions made before a lesson's figure, by scenario: the last
    /// answer and the figures the runs gave.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub predictions: BTreeMap<String, Predicted>,
}

/// One prediction, as kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicted {
    pub lesson: u8,
    pub said: u64,
    /// The figure of each run (at most the first 20 kept).
    pub saw: Vec<u64>,
}

/// Where the progress is kept, if anywhere (see the module's notes).
pub fn path() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    };
    let state = absolute("XDG_STATE_HOME").or_else(|| {
        absolute("HOME")
            .filter(|home| home.is_dir())
            .map(|home| home.join(".local").join("state"))
    })?;
    Some(state.join("idem").join("progress.toml"))
}

/// Lessons and exercises are numbered from 1 to this: the last lesson's.
fn last_lesson() -> u8 {
    crate::lesson::LESSONS.len() as u8
}

impl Progress {
    /// The saved progress; none if there is no file. `Err` if a file is
    /// there and is not one idem can read as its own.
    pub fn load() -> Result<Self> {
        let Some(path) = path() else {
            return Ok(Self::default());
        };
        let Ok(found) = std::fs::symlink_metadata(&path) else {
            return Ok(Self::default());
        };
        if found.file_type().is_symlink() {
            anyhow::bail!(
                "{} is a symbolic link; idem keeps its progress in a file of its own: \
                 move the link away",
                path.display()
            );
        }
        let bytes = crate::files::read_regular(&path, MAX_BYTES, "the progress file")?;
        let text =
            String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
        let not_ours = |why: &str| {
            anyhow::anyhow!(
                "{} is not idem's progress ({}); move it away or remove it",
                path.display(),
                crate::controls::escaped(why.trim_end_matches('.'))
            )
        };
        let progress: Self = toml::from_str(&text).map_err(|err| not_ours(err.message()))?;
        match progress.out_of_range() {
            Some(n) => Err(not_ours(&format!(
                "it names lesson {n}; lessons go from 1 to {}",
                last_lesson()
            ))),
            None => Ok(progress),
        }
    }

    /// A lesson number the file names that no lesson has, if any.
    fn out_of_range(&self) -> Option<String> {
        let numbered = self.lessons_read.iter().chain(&self.exercises_passed);
        let hinted = self.hints_seen.keys().cloned();
        numbered.map(u8::to_string).chain(hinted).find(|n| {
            !n.parse::<u8>()
                .is_ok_and(|n| (1..=last_lesson()).contains(&n))
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

    /// A prediction for `scenario`: saved as [`Progress::read`] saves.
    pub fn predicted(lesson: u8, scenario: &str, said: u64, saw: &[u64]) {
        let kept = Predicted {
            lesson,
            said,
            saw: saw.iter().copied().take(20).collect(),
        };
        Self::update(|p| p.predictions.insert(scenario.to_string(), kept.clone()) != Some(kept));
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

    /// Writes the progress whole, through idem's one safe writer; its
    /// directory is made, private, if it is missing.
    fn save(&self) -> Result<()> {
        let Some(path) = path() else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            crate::files::write::make_dirs(dir, 0o700, "the progress directory")?;
        }
        let text = toml::to_string(self).context("could not write the progress")?;
        crate::files::write::replace(&path, text.as_bytes(), "the progress file")
    }

    /// Forgets everything: removes the file, if it is idem's own.
    pub fn reset() -> Result<Option<PathBuf>> {
        let Some(path) = path() else {
            return Ok(None);
        };
        if std::fs::symlink_metadata(&path).is_err() {
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
