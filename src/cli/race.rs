//! The arguments of the commands that race: `race`, `compare` and `step`.

use clap::Args;

use super::connection::ConnectArgs;
use super::race_shape::RaceFlags;
use super::values::with_default;
use crate::limits;
use crate::race::DEFAULT_STRATEGY;
use crate::strategy::StrategyKind;

#[derive(Debug, Args)]
pub struct RaceArgs {
    #[arg(long, short = 's', value_enum,
          help = with_default("The guard shape every worker runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Compare the loser policies of claim-work-complete instead of the strategies.
    #[arg(long)]
    pub losers: bool,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StepArgs {
    #[arg(long, short = 's', value_enum,
          help = with_default("The guard shape every worker runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,

    /// The order of steps, one worker number per step (e.g. 1,2,1,2):
    /// replays an interleaving without asking.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = limits::SCHEDULE_WORKER.parser())]
    pub schedule: Option<Vec<u64>>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}
