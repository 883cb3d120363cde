//! The race's shape: how many workers, which key, in what order, and whether they come over the wire.

use clap::Args;
use serde::{Deserialize, Serialize};

use super::fingerprints::Asks;
use crate::http::caller::KeyScope;
use crate::limits;
use crate::race::moves::Move;

/// The key every worker sends unless `--key` says otherwise.
pub const DEFAULT_KEY: &str = "award-xp-lesson-1";

/// How a race's requests reach the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Each worker is a task calling the strategy directly.
    #[default]
    InProcess,
    /// Each worker is an HTTP client with its own connection to the app
    /// (`idem serve`, started in-process on a loopback port).
    Http,
}

/// The most workers `idem step` drives, and the fewest.
pub const STEPPED_WORKERS: std::ops::RangeInclusive<usize> = 2..=5;

/// The workers and their key (`--workers`, `--key`).
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShapeInput {
    #[arg(long, short = 'w', value_name = "N", allow_negative_numbers = true,
          value_parser = limits::WORKERS.parser(),
          help = limits::WORKERS.help("Concurrent workers, each one request with the same key."))]
    pub workers: Option<u64>,

    #[arg(long, short = 'k', value_name = "KEY",
          help = crate::limits::help_with_default("The idempotency key every worker sends.", DEFAULT_KEY))]
    pub key: Option<String>,

    /// Run step by step in this order (worker numbers, `clock`, `crashN`),
    /// as `idem step --schedule`, whose flag it is.
    #[arg(skip)]
    pub schedule: Option<Vec<Move>>,

    /// Over HTTP: whether a key is the caller's own or everyone's
    /// (`idem serve --key-scope`, whose flag it is).
    #[arg(skip)]
    pub key_scope: Option<KeyScope>,
}

/// Over the wire (`--http`, `--replicas`).
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WireInput {
    /// Race over the wire: start the course's app (`idem serve`) on a
    /// loopback port and send each worker's request as a real HTTP client
    /// on its own connection. The outcomes are the statuses on the wire.
    #[arg(long)]
    pub http: bool,

    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::REPLICAS.parser(),
          help = limits::REPLICAS.help(
              "With --http: run the app as N processes, each with its own pool and \
               threads, behind one port that hands each connection to the next in turn."))]
    pub replicas: Option<u64>,
}

/// The race's requests: how many workers send one, what each asks for,
/// and how they reach the app.
#[derive(Debug, Clone)]
pub struct Requests {
    workers: usize,
    key: String,
    /// What each worker asks for (`--amounts`, `--lessons`, `--users`).
    asks: Asks,
    transport: Transport,
    schedule: Option<Vec<Move>>,
}

impl ShapeInput {
    /// The requests, with what the other groups say of them.
    pub(super) fn resolve(&self, wire: &WireInput, asks: Asks) -> Requests {
        Requests {
            workers: self.workers.unwrap_or(limits::WORKERS.default()) as usize,
            key: self.key.clone().unwrap_or_else(|| DEFAULT_KEY.to_string()),
            asks,
            transport: match wire.http {
                true => Transport::Http,
                false => Transport::InProcess,
            },
            schedule: self.schedule.clone(),
        }
    }
}

impl Requests {
    /// How many workers race.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The key every worker sends.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What the workers ask for.
    pub fn asks(&self) -> &Asks {
        &self.asks
    }

    /// How the workers' requests reach the strategy.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// A stepped race's order of steps, one worker number each.
    pub fn schedule(&self) -> Option<&[Move]> {
        self.schedule.as_deref()
    }
}
