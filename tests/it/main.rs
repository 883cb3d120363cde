//! idem's integration tests, one binary: a module per area, each against a real PostgreSQL.
//!
//! One binary links tokio, sqlx and hyper once instead of once per area.
//! Run one area with `cargo test --test it <area>::`, e.g. `cargo test
//! --test it layers::`.

// No function over 80 lines (clippy.toml), tests included.
#![warn(clippy::too_many_lines)]

mod bounds;
mod browser;
mod ci_script;
mod cli;
mod cluster;
mod common;
mod docs;
mod engines;
mod engines_chosen;
mod engines_guard_files;
mod engines_served;
mod engines_stepped;
mod engines_sweep;
mod engines_user_server;
mod exercises;
mod exercises_guard;
mod explore;
mod explore_branches;
mod failure_classes;
mod fields;
mod files;
mod fingerprints_and_keys;
mod front_door;
mod galera;
mod guard;
mod guard_library;
mod hang_ups;
mod helper_connections;
mod hostile;
mod http;
mod json_contract;
mod kills;
mod layers;
mod losers;
mod middleware;
mod mysql_count;
mod no_race;
mod pooler;
mod predictions;
mod primaries;
mod probe_plan;
mod probe_status;
mod race;
mod reach;
mod redis;
mod renderers;
mod replicas;
mod safeguards;
mod screen;
mod sentences;
mod serve_answers;
mod server;
mod shell;
mod standby;
mod starter;
mod stores;
mod teaching;
mod terminal_text;
mod transactions;
mod trust;
mod untrusted_guard;
