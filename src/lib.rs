//! idem: see why idempotency guards fail under concurrency.
//!
//! Two things are public: [`main`], the whole `idem` program, and [`guard`],
//! the course's complete idempotency guard as a library for your own
//! service. Everything else is idem's own, laid out as the course is told
//! (`strategy/` holds the guard shapes, `race/` runs N workers through one of
//! them on a real connection pool, `db/` provides the database, `report/`
//! prints what happened) and described in the README.

#![deny(missing_docs)]

/// Declares modules that are idem's own: private to the crate, and public
/// (hidden from the documentation) only for idem's tests and examples,
/// which turn on the `internals` feature.
macro_rules! internal {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "internals")]
            #[doc(hidden)]
            pub mod $name;
            #[cfg(not(feature = "internals"))]
            mod $name;
        )*
    };
}

internal!(
    app, bench, challenge, cli, commands, db, files, http, keys, lesson, limits, matrix, pooler,
    probe, race, report, request, scenario, signals, store, strategy, trust,
);

pub use app::main;
pub use strategy::guard;

use anyhow::Result;

use cli::connection::ConnectArgs;
use cli::{Cli, Command};
use db::{ConnectOptions, Database};
use report::Output;
use signals::Signals;

/// Runs one command line to the end. Arguments are checked before any
/// database starts; whatever was started is cleaned up however the run ends.
pub(crate) async fn run(cli: Cli) -> Result<()> {
    use commands as c;
    report::style::init(cli.color.forced());
    let s = &mut Signals::install()?;
    match cli.command {
        Command::Race(a) => planned(&a.connect, s, c::race::plan(&a), c::race::execute).await,
        Command::Compare(a) => {
            planned(&a.connect, s, c::compare::plan(&a), c::compare::execute).await
        }
        Command::Matrix(a) => planned(&a.connect, s, c::matrix::plan(&a), c::matrix::execute).await,
        Command::Stores(a) => planned(&a.connect, s, c::stores::plan(&a), c::stores::execute).await,
        Command::Step(a) => planned(&a.connect, s, c::step::plan(&a), c::step::execute).await,
        Command::Keys(a) => planned(&a.connect, s, c::keys::plan(&a), c::keys::execute).await,
        Command::Bench(a) => planned(&a.connect, s, c::bench::plan(&a), c::bench::execute).await,
        Command::Audit(a) => {
            let out = Output::from_json_flag(a.json);
            with_options(c::audit::connect(&a)?, s, async |db| {
                c::audit::execute(&a, out, db).await
            })
            .await
        }
        Command::Reap(a) => {
            let out = Output::from_json_flag(a.json);
            with_options(c::reap::connect(&a), s, async |db| {
                c::reap::execute(&a, out, db).await
            })
            .await
        }
        Command::Scenario(a) => scenario(a, !cli.no_pager, s).await,
        Command::Lessons => c::lesson::list(),
        Command::Lesson(a) => {
            let told = Told {
                no_pause: a.no_pause,
                page: !cli.no_pager,
            };
            lessons(&[a.number as u8], told, &a.connect, s).await
        }
        Command::Tour(a) => {
            let told = Told {
                no_pause: a.no_pause,
                page: !cli.no_pager,
            };
            lessons(&[1, 2, 3, 4, 5, 6, 7, 8], told, &a.connect, s).await
        }
        Command::Challenge(a) => challenge(a, s).await,
        Command::Serve(a) => serve(a, s).await,
        Command::Probe(a) => {
            let plan = c::probe::plan(&a)?;
            report::verdict_awaited();
            tokio::select! {
                biased;
                signal = s.received() => Err(signal.into()),
                probed = c::probe::execute(plan) => probed,
            }
        }
        Command::Pooler(a) => {
            let plan = c::pooler::plan(&a)?;
            let options = db::ConnectOptions {
                cluster: a.cluster.options(),
                ..db::ConnectOptions::default()
            };
            with_options(options, s, async |db| c::pooler::execute(plan, db).await).await
        }
        Command::Replica(a) => {
            let plan = c::replica::plan(&a)?;
            with_options(a.connect.options_in(&a.schema), s, async |db| {
                c::replica::execute(plan, db).await
            })
            .await
        }
        Command::Db(a) => {
            let opts = c::db::plan(&a)?;
            c::db::execute(&a, opts, s).await
        }
        Command::Doctor(a) => {
            let db = open(a.connect.options(), s).await?;
            c::doctor::execute(db, Output::from_json_flag(a.json)).await
        }
    }
}

/// How lessons are told: paged on a terminal unless `--no-pager`, with
/// pauses unless `--no-pause` or paged.
struct Told {
    no_pause: bool,
    page: bool,
}

/// `idem lesson N` and `idem tour`.
async fn lessons(numbers: &[u8], told: Told, connect: &ConnectArgs, s: &mut Signals) -> Result<()> {
    let lessons = commands::lesson::plan(numbers)?;
    let paged = report::pager::start(told.page);
    let no_pause = told.no_pause || paged.is_some();
    let told = with_database(connect, s, async |db| {
        commands::lesson::tell(&lessons, no_pause, db).await
    })
    .await;
    paged_to_the_end(paged, told, s).await
}

/// Closes the pager, if there is one, once the run has ended as `ran`; a
/// signal while the pager is open ends the run too, unless it had failed
/// already. After a signal nobody waits for a pager that ignores it.
async fn paged_to_the_end(
    pager: Option<report::pager::Pager>,
    ran: Result<()>,
    signals: &mut Signals,
) -> Result<()> {
    let Some(pager) = pager else {
        return ran;
    };
    // Stopped by a signal already: dropping it ends the pager.
    if db::child::stop_requested() {
        drop(pager);
        return ran;
    }
    let closed = pager.close(signals.received()).await;
    ran.and(closed.map_err(Into::into))
}

/// `idem scenario list` and `idem scenario run`.
async fn scenario(a: cli::teaching::ScenarioArgs, page: bool, s: &mut Signals) -> Result<()> {
    use commands as c;
    let scenarios = c::scenario::plan(&a)?;
    match a.command {
        cli::teaching::ScenarioCommand::List { .. } => c::scenario::list(&scenarios),
        cli::teaching::ScenarioCommand::Run { json, .. } => {
            report::verdict_awaited();
            let out = Output::from_json_flag(json);
            let paged = report::pager::start(page && !json);
            let ran = with_database(&a.connect, s, async |db| {
                c::scenario::run(scenarios, out, db).await
            })
            .await;
            paged_to_the_end(paged, ran, s).await
        }
    }
}

/// `idem challenge`: idem's own guard in-process, or any guard at `--url`.
async fn challenge(a: cli::wire_commands::ChallengeArgs, s: &mut Signals) -> Result<()> {
    use commands as c;
    report::verdict_awaited();
    let out = Output::from_json_flag(a.json);
    if let Some(probe) = c::challenge::plan_http(&a)? {
        return tokio::select! {
            biased;
            signal = s.received() => Err(signal.into()),
            judged = c::challenge::execute_http(probe, out) => judged,
        };
    }
    with_database(&a.connect, s, async |db| {
        c::challenge::execute(db, out).await
    })
    .await
}

/// `idem serve`, until Ctrl-C or SIGTERM stops it.
async fn serve(a: cli::wire_commands::ServeArgs, s: &mut Signals) -> Result<()> {
    use commands as c;
    let served = planned(&a.connect, s, c::serve::plan(&a), c::serve::execute).await;
    match served {
        // Ctrl-C or SIGTERM is how a server is stopped: the schema is
        // gone by now, and that is a clean end.
        Err(err) if err.is::<signals::Interrupted>() => {
            let dropped = match report::request_log::dropped() {
                0 => String::new(),
                n => format!(" ({n} log lines dropped: stdout did not keep up)"),
            };
            eprintln!("idem serve: stopped; its tables are gone{dropped}");
            Ok(())
        }
        other => other,
    }
}

/// Runs a planned command against the database: a plan that fails starts
/// nothing.
async fn planned<P>(
    connect: &ConnectArgs,
    signals: &mut Signals,
    plan: Result<P>,
    execute: impl AsyncFnOnce(P, &Database) -> Result<()>,
) -> Result<()> {
    let plan = plan?;
    with_database(connect, signals, async |db| execute(plan, db).await).await
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
