//! idem: see why idempotency guards fail under concurrency.
//!
//! Two things are public: [`main`], the whole `idem` program, and [`guard`],
//! the course's complete idempotency guard as a library for your own
//! service. Everything else is idem's own, laid out as the course is told
//! (`strategy/` holds the guard shapes, `race/` runs N workers through one of
//! them on a real connection pool, `db/` provides the database, `report/`
//! prints what happened) and described in README.md and docs/.

#![deny(missing_docs)]
// No function over 80 lines (clippy.toml): CI's clippy runs with -D warnings.
#![warn(clippy::too_many_lines)]

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
    app, bench, challenge, cli, commands, controls, db, exercise, explore, files, http, keys,
    lesson, lifeline, limits, matrix, pooler, probe, progress, race, report, request, scenario,
    signals, store, strategy, tasks, trust,
);

pub use app::main;
pub use strategy::guard;

use anyhow::Result;

use cli::{Cli, Command};
use commands::dispatch::dispatch;
use signals::Signals;

/// Runs one command line to the end: each command is planned (its
/// arguments checked before anything starts), then dispatched, which opens
/// what it needs and cleans it all up however the run ends.
pub(crate) async fn run(cli: Cli) -> Result<()> {
    use commands as c;
    report::style::init(cli.color.forced());
    let s = &mut Signals::install()?;
    let page = !cli.no_pager;
    match cli.command {
        Command::Race(a) => match c::race::plan(&a)? {
            c::race::Planned::Postgres(plan) => dispatch(*plan, s).await,
            c::race::Planned::Mariadb(plan) => dispatch(*plan, s).await,
        },
        Command::Compare(a) => match c::compare::plan(&a)? {
            c::compare::Planned::Postgres(plan) => dispatch(*plan, s).await,
            c::compare::Planned::Engines(plan) => dispatch(*plan, s).await,
            c::compare::Planned::OnServer(plan) => dispatch(plan, s).await,
        },
        Command::Matrix(a) => match c::matrix::plan(&a)? {
            c::matrix::Planned::Postgres(plan) => dispatch(*plan, s).await,
            c::matrix::Planned::Mariadb(plan) => dispatch(*plan, s).await,
        },
        Command::Stores(a) => dispatch(c::stores::plan(&a)?, s).await,
        // Their exit 1 is a verdict (a guard that failed): a wrong command
        // line exits 2, as clap's own refusals do.
        Command::Step(a) => match c::step::plan(&a).map_err(bad_input)? {
            c::step::Planned::Postgres(plan) => dispatch(*plan, s).await,
            c::step::Planned::Mariadb(plan) => dispatch(*plan, s).await,
        },
        Command::Explore(a) => match c::explore::plan(&a).map_err(bad_input)? {
            c::explore::Planned::Postgres(plan) => dispatch(*plan, s).await,
            c::explore::Planned::Mariadb(plan) => dispatch(*plan, s).await,
        },
        Command::Keys(a) => dispatch(c::keys::plan(&a)?, s).await,
        Command::Bench(a) => dispatch(c::bench::plan(&a)?, s).await,
        Command::Audit(a) => dispatch(c::audit::plan(&a)?, s).await,
        Command::Reap(a) => dispatch(c::reap::plan(&a), s).await,
        // A scenario run's exit 1 is its verdict: a file it cannot read is 2.
        Command::Scenario(a) => match c::scenario::plan(&a, page).map_err(bad_input)? {
            c::scenario::Planned::List(list) => dispatch(list, s).await,
            c::scenario::Planned::Run(run) => dispatch(*run, s).await,
        },
        Command::Lessons => dispatch(c::lesson::List, s).await,
        Command::Lesson(a) => {
            let how = (a.no_pause, a.no_ask, page);
            lessons(&[a.number as u8], how, (&a.engine, &a.connect), s).await
        }
        Command::Tour(a) => {
            let first = a.from.unwrap_or(1) as u8;
            let numbers: Vec<u8> = (first..=crate::lesson::LESSONS.len() as u8).collect();
            let how = (a.no_pause, a.no_ask, page);
            lessons(&numbers, how, (&a.engine, &a.connect), s).await
        }
        Command::Progress(a) => dispatch(c::progress::Shown { reset: a.reset }, s).await,
        Command::Exercise(a) => dispatch(c::exercise::plan(&a)?, s).await,
        Command::Check(a) => match c::check::plan(&a)? {
            c::check::Planned::File(file) => dispatch(*file, s).await,
            c::check::Planned::AtUrl(at_url) => dispatch(at_url, s).await,
        },
        Command::Hint(a) => dispatch(c::hint::plan(&a)?, s).await,
        Command::Challenge(a) => match c::challenge::plan(&a)? {
            c::challenge::Challenge::AtUrl(at_url) => dispatch(*at_url, s).await,
            c::challenge::Challenge::InProcess(in_process) => dispatch(*in_process, s).await,
            c::challenge::Challenge::Starter(written) => dispatch(written, s).await,
        },
        Command::Serve(a) => match a.engine {
            race::engine::Engine::Postgres => dispatch(c::serve::plan(&a)?, s).await,
            race::engine::Engine::Mariadb => dispatch(c::serve_mariadb::plan(&a)?, s).await,
        },
        Command::Probe(a) => probe(&a, s).await,
        Command::Pooler(a) => dispatch(c::pooler::plan(&a)?, s).await,
        Command::Replica(a) => dispatch(c::replica::plan(&a)?, s).await,
        Command::Db(a) => dispatch(c::db::plan(&a)?, s).await,
        Command::Doctor(a) => dispatch(c::doctor::plan(&a)?, s).await,
        Command::Completions(a) => c::shell::completions(a.shell, a.dir.as_deref()),
        Command::Man(a) => c::shell::man(a.dir.as_deref()),
    }
}

/// `idem probe`, with a plan file or one request's flags; a wrong command
/// line (or plan) exits 2, as clap's own refusals do.
async fn probe(a: &cli::wire_commands::ProbeArgs, s: &mut Signals) -> Result<()> {
    use commands as c;
    match &a.plan {
        Some(file) => {
            let plan = c::probe_plan::plan(a, file).map_err(bad_input)?;
            c::probe_reports::check(&a.report).map_err(bad_input)?;
            dispatch(plan, s).await
        }
        None => {
            let plan = c::probe::plan(a).map_err(bad_input)?;
            c::probe_reports::check(&plan.reports).map_err(bad_input)?;
            dispatch(plan, s).await
        }
    }
}

/// `idem lesson N` and `idem tour`: lessons told in turn, `how` being
/// (`--no-pause`, `--no-ask`, whether a pager may take the output).
async fn lessons(
    numbers: &[u8],
    (no_pause, no_ask, page): (bool, bool, bool),
    (engine, connect): (&cli::teaching::EngineChoice, &cli::connection::ConnectArgs),
    s: &mut Signals,
) -> Result<()> {
    let how = commands::lesson::Telling {
        no_pause,
        page,
        no_ask,
    };
    let plan = commands::lesson::plan(numbers, how, engine.engines(), connect.options());
    dispatch(plan.map_err(bad_input)?, s).await
}

/// A command line refused before anything ran: exit 2, as clap's own
/// refusals are, never the 1 of a verdict.
fn bad_input(err: anyhow::Error) -> anyhow::Error {
    report::status::Status::BadInput.because(format!("{err:#}"))
}
