//! idem: see why idempotency guards fail under concurrency.
//!
//! The crate is laid out as the course is told: [`strategy`] holds the guard
//! shapes, one file each; [`race`] runs N workers through one of them on a
//! real connection pool; [`db`] provides the database (a disposable cluster or
//! a real server); [`report`] prints what happened. [`cli`] and [`commands`]
//! wire them to the command line.

pub mod bench;
pub mod challenge;
pub mod cli;
pub mod commands;
pub mod db;
pub mod keys;
pub mod lesson;
pub mod race;
pub mod report;
pub mod request;
pub mod scenario;
pub mod signals;
pub mod store;
pub mod strategy;

/// The whole guard of lesson 7, one of the strategies.
pub use strategy::guard;

use anyhow::Result;

use cli::{Cli, Command, ConnectArgs};
use db::{ConnectOptions, Database};
use report::Output;
use signals::Signals;

/// Runs one command line to the end. Arguments are checked before any
/// database starts; whatever was started is cleaned up however the run ends.
pub async fn run(cli: Cli) -> Result<()> {
    report::style::init(cli.color.forced());
    let mut signals = Signals::install()?;
    match cli.command {
        Command::Race(args) => {
            let plan = commands::race::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::race::execute(plan, db).await
            })
            .await
        }
        Command::Compare(args) => {
            let plan = commands::compare::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::compare::execute(plan, db).await
            })
            .await
        }
        Command::Stores(args) => {
            let plan = commands::stores::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::stores::execute(plan, db).await
            })
            .await
        }
        Command::Audit(args) => {
            let connect = commands::audit::connect(&args)?;
            with_options(connect, &mut signals, async |db| {
                commands::audit::execute(&args, Output::from_json_flag(args.json), db).await
            })
            .await
        }
        Command::Reap(args) => {
            let connect = commands::reap::connect(&args);
            with_options(connect, &mut signals, async |db| {
                commands::reap::execute(&args, Output::from_json_flag(args.json), db).await
            })
            .await
        }
        Command::Scenario(args) => {
            let scenarios = commands::scenario::plan(&args)?;
            match args.command {
                cli::ScenarioCommand::List { .. } => commands::scenario::list(&scenarios),
                cli::ScenarioCommand::Run { json, .. } => {
                    with_database(&args.connect, &mut signals, async |db| {
                        commands::scenario::run(scenarios, Output::from_json_flag(json), db).await
                    })
                    .await
                }
            }
        }
        Command::Lessons => commands::lesson::list(),
        Command::Lesson(args) => {
            let lessons = commands::lesson::plan(&[args.number as u8])?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::lesson::tell(&lessons, args.no_pause, db).await
            })
            .await
        }
        Command::Tour(args) => {
            let lessons = commands::lesson::plan(&[1, 2, 3, 4, 5, 6, 7])?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::lesson::tell(&lessons, args.no_pause, db).await
            })
            .await
        }
        Command::Step(args) => {
            let plan = commands::step::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::step::execute(plan, db).await
            })
            .await
        }
        Command::Challenge(args) => {
            with_database(&args.connect, &mut signals, async |db| {
                commands::challenge::execute(db, Output::from_json_flag(args.json)).await
            })
            .await
        }
        Command::Keys(args) => {
            let plan = commands::keys::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::keys::execute(plan, db).await
            })
            .await
        }
        Command::Bench(args) => {
            let plan = commands::bench::plan(&args)?;
            with_database(&args.connect, &mut signals, async |db| {
                commands::bench::execute(plan, db).await
            })
            .await
        }
        Command::Doctor(args) => {
            let db = open(args.connect.options(), &mut signals).await?;
            commands::doctor::execute(db, Output::from_json_flag(args.json)).await
        }
    }
}

/// Opens the database, runs `body` against it, and closes it again, also
/// when `body` fails or a signal arrives.
async fn with_database(
    connect: &ConnectArgs,
    signals: &mut Signals,
    body: impl AsyncFnOnce(&Database) -> Result<()>,
) -> Result<()> {
    with_options(connect.options(), signals, body).await
}

/// [`with_database`] for connect options a command has adjusted.
async fn with_options(
    options: ConnectOptions,
    signals: &mut Signals,
    body: impl AsyncFnOnce(&Database) -> Result<()>,
) -> Result<()> {
    let db = open(options, signals).await?;
    let outcome = tokio::select! {
        biased;
        signal = signals.received() => Err(signal.into()),
        outcome = body(&db) => outcome,
    };
    let closed = db.close().await;
    outcome.and(closed.map(drop))
}

/// Opens the database; a signal during start-up abandons it, and dropping
/// the half-open database cleans up what was started.
async fn open(options: ConnectOptions, signals: &mut Signals) -> Result<Database> {
    tokio::select! {
        biased;
        signal = signals.received() => Err(signal.into()),
        db = Database::open(&options) => db,
    }
}
