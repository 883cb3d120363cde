//! Everything idem prints, kept apart from the logic that produced it.
//!
//! Tables, timelines and JSON are all made from the same result structs
//! (`RaceResult`, `RunsSummary`), so the human and machine views never disagree.

pub mod bench;
pub mod challenge;
pub mod ci;
pub mod engine;
pub mod exercise;
pub mod explain;
mod explain_redis;
pub mod explore;
pub mod failover;
pub mod keys;
pub mod losers;
pub mod matrix;
pub mod output;
pub mod pager;
pub mod pooler;
pub mod probe;
pub mod progress;
pub mod race;
pub mod request_log;
pub mod runs;
pub mod scenario;
pub mod serve;
pub mod sql;
pub mod status;
pub mod stores;
pub mod style;
pub mod table;
pub mod timeline;
pub mod trace_file;
pub mod width;

pub use output::{BrokenPipe, Output, emit, emit_verbatim, verdict_awaited};
