//! Every command-line argument idem takes, and nothing else.
//!
//! These are the "low" arguments, as close to what the user typed as can
//! be: a flag that was not given is `None`, never a default filled in by
//! clap. The commands hand them to one builder (`RaceInput::build` for a
//! race) that applies the defaults and checks the whole; `--help` shows
//! those defaults from the same table of limits.
//!
//! The shared groups (where the database is, what is shown, the shape of a
//! race) each have a file; so do the arguments of each family of commands.

pub mod connection;
pub mod measure;
pub mod output;
pub mod race;
pub mod race_shape;
pub mod teaching;
pub mod values;
pub mod wire_commands;

use clap::{Parser, Subcommand};

use output::ColorChoice;

/// See why idempotency guards fail under concurrency: real races, real PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "idem", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// When to colour the output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// Do not page long output (lessons, the tour, scenario runs) through
    /// $PAGER or `less`, even on a terminal.
    #[arg(long, global = true)]
    pub no_pager: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The lessons, one line each.
    Lessons,
    /// Tell one lesson and run its demonstrations live.
    Lesson(teaching::LessonArgs),
    /// All the lessons in order.
    Tour(teaching::TourArgs),
    /// The lessons you have read and the exercises passed, kept between runs.
    Progress(teaching::ProgressArgs),
    /// Write a lesson's exercise, a guard file with the lesson's flaw in it, into this folder.
    Exercise(teaching::ExerciseArgs),
    /// Race your guard file with a lesson's cases: PASS or FAIL each, exit 1 until all pass.
    Check(teaching::CheckArgs),
    /// The next hint for a lesson's exercise; after a pass, why the answer works.
    Hint(teaching::HintArgs),
    /// Race N workers on one key with one strategy and count the rows (lessons 1 and 2).
    Race(race::RaceArgs),
    /// Run the course's five strategies under the same settings, side by side.
    Compare(race::CompareArgs),
    /// Every guard shape under each transaction setting and isolation level,
    /// measured: what holds for the rows, and what for the work (lesson 8).
    Matrix(race::MatrixArgs),
    /// Drive the interleaving step by step, by hand or with --schedule.
    Step(race::StepArgs),
    /// Run the guard under every interleaving of its requests' steps, each
    /// from fresh tables, and show the shortest one that breaks it.
    #[command(mut_arg("workers", |a| a.help(race::EXPLORE_WORKERS_HELP)))]
    Explore(race::ExploreArgs),
    /// List or run the scenario files, each checked against its expected figures.
    Scenario(teaching::ScenarioArgs),
    /// Clients that crash and retry with random or derived keys (lesson 6).
    Keys(teaching::KeysArgs),
    /// The key table and the Solid-Cache-like store, measured side by side (lesson 5).
    Stores(teaching::StoresArgs),
    /// What each store still knows about a key in a kept schema (lesson 5).
    Audit(teaching::AuditArgs),
    /// Delete completed keys past their retention (lesson 5).
    Reap(teaching::ReapArgs),
    /// Judge idem's own guard with the challenge's races (lesson 7); yours in
    /// Rust: `cargo run --example challenge`; in any language: --url.
    Challenge(wire_commands::ChallengeArgs),
    /// Serve the course's app over HTTP: POST /lessons/{lesson}/complete with an Idempotency-Key.
    Serve(wire_commands::ServeArgs),
    /// Race N identical requests with one Idempotency-Key at any HTTP API and count the effects.
    #[command(after_help = crate::report::status::Status::contract())]
    Probe(wire_commands::ProbeArgs),
    /// One app replica of `--replicas`, driven by its parent idem.
    #[command(hide = true)]
    Replica(wire_commands::ReplicaArgs),
    /// What a pooler in transaction mode (a real PgBouncer) does to a
    /// session's settings, locks and prepared statements, seen live.
    Pooler(teaching::PoolerArgs),
    /// A disposable PostgreSQL for your own program: `idem db -- ruby app.rb`
    /// runs it with DATABASE_URL set, and removes the cluster when it exits.
    Db(teaching::DbArgs),
    /// Show which PostgreSQL idem uses and how long its cluster takes to start and stop.
    Doctor(measure::DoctorArgs),
    /// Measure cluster start-up, race rate, guard throughput, hot key and scale (BENCHMARKS.md).
    Bench(measure::BenchArgs),
    /// Print the completion script for a shell (bash, zsh, fish, powershell, elvish), or write it into --dir.
    Completions(ShellArgs),
    /// Print idem's man page (roff), or write a page per command into --dir.
    Man(ManArgs),
}

/// `idem completions`.
#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,

    /// Write the script into this directory, under the name the shell
    /// looks for there (idem.bash, _idem, idem.fish, ...), instead of
    /// printing it.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// `idem man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write idem.1 and a page per command (idem-race.1, ...) into this
    /// directory instead of printing idem.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}
