//! The flags every race takes, for `race`, `compare` and `step` alike: the race's option groups (defined with their options in `race/options/`), how many runs, and what to show.
//!
//! A flag not given is `None` (a switch not given is `false`), so the one
//! builder can tell "not given" from "given as the default" and a scenario
//! file's values mean the same as the flags'.

use clap::Args;

use super::output::ShowFlags;
use crate::limits;
use crate::race::DEFAULT_STRATEGY;
use crate::race::options::RaceInput;
use crate::strategy::StrategyKind;

/// Every flag of a race.
#[derive(Debug, Clone, Args)]
pub struct RaceFlags {
    #[arg(long, short = 'r', value_name = "R", allow_negative_numbers = true,
          value_parser = limits::RUNS.parser(),
          help = limits::RUNS.help("Repeat the race R times on fresh tables and show the distribution."))]
    pub runs: Option<u64>,

    #[command(flatten)]
    pub input: RaceInput,

    #[command(flatten)]
    pub show: ShowFlags,
}

impl RaceFlags {
    /// What the flags say, with `strategy` the one the command runs
    /// (`compare` runs each in turn).
    pub fn input(&self, strategy: Option<StrategyKind>) -> RaceInput {
        self.input.clone().with(|r| r.strategy.strategy = strategy)
    }

    /// How many times to run the race.
    pub fn runs(&self) -> u64 {
        self.runs.unwrap_or(limits::RUNS.default())
    }
}

/// `-s`: the built-in strategy a command runs (not `compare`'s, which
/// runs them all).
#[derive(Debug, Clone, Args)]
pub struct StrategyFlag {
    #[arg(long, short = 's', value_enum,
          help = limits::help_with_default("The guard shape every worker runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,
}
