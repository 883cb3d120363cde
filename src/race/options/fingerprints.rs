//! Lesson 4: what the workers ask for (amount, lesson, user), and whether the guard checks it.

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::said;
use crate::limits::{self, Limit, Origin};

/// `--amounts`, `--lessons`, `--users`: what each worker asks for, all on one key.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmountInput {
    /// Per-worker XP amounts, all on one key: worker i asks for the i-th (e.g. 10,20,10,30,10).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = |t: &str| one(&limits::AMOUNT, t))]
    pub amounts: Option<Vec<i32>>,

    /// Per-worker lessons the award is for, all on one key (default: lesson 1 for all).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = |t: &str| one(&limits::LESSONS, t))]
    pub lessons: Option<Vec<i32>>,

    /// Per-worker users the award is for, all on one key (default: user 42 for all).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = |t: &str| one(&limits::USERS, t).map(i64::from))]
    pub users: Option<Vec<i64>>,
}

/// `--no-fingerprint`: whether the guard checks what a request asks for
/// (an app's setting, which `serve` takes too).
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FingerprintInput {
    /// Store no request fingerprint and check none: a reused key silently
    /// replays the first request's result (the wrong answer of lesson 4).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long)]
    #[serde(skip)]
    pub no_fingerprint: bool,

    /// The switch above, as a scenario file says it.
    #[arg(skip)]
    pub fingerprint: Option<bool>,
}

impl FingerprintInput {
    /// Whether the guard stores and checks request fingerprints.
    pub(super) fn fingerprint(&self) -> bool {
        said(self.no_fingerprint, false)
            .or(self.fingerprint)
            .unwrap_or(true)
    }
}

/// What the workers ask for, worker by worker; an empty list leaves every
/// worker the race's one value.
#[derive(Debug, Clone, Default)]
pub struct Asks {
    amounts: Vec<i32>,
    lessons: Vec<i32>,
    users: Vec<i64>,
}

/// The XP, lesson and user every worker asks for unless told otherwise.
const AMOUNT: i32 = 10;
const LESSON: i32 = 1;
const USER: i64 = 42;

impl AmountInput {
    /// The lists as given, empty where not.
    pub(super) fn asks(&self) -> Asks {
        Asks {
            amounts: self.amounts.clone().unwrap_or_default(),
            lessons: self.lessons.clone().unwrap_or_default(),
            users: self.users.clone().unwrap_or_default(),
        }
    }
}

impl Asks {
    /// What worker `worker` (from 1) asks for: amount, lesson, user.
    pub fn amount_of(&self, worker: usize) -> i32 {
        nth(&self.amounts, worker).unwrap_or(AMOUNT)
    }

    pub fn lesson_of(&self, worker: usize) -> i32 {
        nth(&self.lessons, worker).unwrap_or(LESSON)
    }

    pub fn user_of(&self, worker: usize) -> i64 {
        nth(&self.users, worker).unwrap_or(USER)
    }

    /// The lesson every worker asks for, when they all ask for one: over
    /// HTTP it is the URL's.
    pub fn one_lesson(&self) -> Option<i32> {
        match self.lessons.split_first() {
            None => Some(LESSON),
            Some((first, rest)) => rest.iter().all(|l| l == first).then_some(*first),
        }
    }

    /// Each list within its bounds and one value per worker.
    pub(crate) fn check(&self, workers: usize, origin: Origin) -> Result<()> {
        let widen = |v: &[i32]| v.iter().map(|n| i64::from(*n)).collect::<Vec<_>>();
        let lists = [
            (&limits::AMOUNT, widen(&self.amounts), "amount"),
            (&limits::LESSONS, widen(&self.lessons), "lesson"),
            (&limits::USERS, self.users.clone(), "user"),
        ];
        for (limit, values, what) in lists {
            for value in &values {
                limit.check(u64::try_from(*value).unwrap_or(0), origin)?;
            }
            if !values.is_empty() && values.len() != workers {
                bail!(
                    "{} has {} values for {workers} workers; give one {what} per worker",
                    limit.name(origin),
                    values.len(),
                );
            }
        }
        Ok(())
    }
}

/// The `worker`-th (from 1) value of a per-worker list, if it has one.
fn nth<T: Copy>(list: &[T], worker: usize) -> Option<T> {
    list.get(worker.checked_sub(1)?).copied()
}

/// Parses one value of a per-worker list within its limit.
fn one(limit: &Limit, text: &str) -> Result<i32, String> {
    limit.parse(text).map(|n| n as i32)
}
