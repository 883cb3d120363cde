//! Lesson 4: what the workers ask for, and whether the guard checks it.

use clap::Args;
use serde::{Deserialize, Serialize};

use super::said;

/// `--amounts`: what the workers ask for.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmountInput {
    /// Per-worker XP amounts, all on one key: worker i asks for the i-th (e.g. 10,20,10,30,10).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = amount)]
    pub amounts: Option<Vec<i32>>,
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

impl AmountInput {
    /// Per-worker amounts, empty if not given.
    pub(super) fn amounts(&self) -> Vec<i32> {
        self.amounts.clone().unwrap_or_default()
    }
}

/// Parses one XP amount within its limit.
fn amount(text: &str) -> Result<i32, String> {
    crate::limits::AMOUNT.parse(text).map(|n| n as i32)
}
