//! One file per command, each of one shape (`command.rs`): a plan that checks
//! its arguments before anything is touched, what it needs, and its run,
//! which the one dispatcher (`dispatch.rs`) gives what it needs.

pub mod audit;
pub mod bench;
pub mod challenge;
pub mod check;
pub mod command;
pub mod compare;
pub mod compare_engines;
pub mod db;
pub mod dispatch;
pub mod doctor;
pub mod exercise;
pub mod explore;
pub mod hint;
pub mod keyboard;
pub mod keys;
pub mod lesson;
pub mod matrix;
pub mod pooler;
pub mod predict;
pub mod probe;
pub mod probe_plan;
pub mod probe_reports;
pub mod progress;
pub mod race;
pub mod race_mariadb;
pub mod reap;
pub mod replica;
pub mod scenario;
pub mod serve;
pub mod serve_mariadb;
pub mod shell;
pub mod starter;
pub mod step;
pub mod step_puzzle;
pub mod stores;
