//! The one shape of a command: its plan (arguments checked before anything opens), what the plan needs around its run, and the run.
//!
//! Every command's `plan` function returns a value of this shape, and the
//! one dispatcher (`dispatch.rs`) provides what it needs: the database or
//! nothing, the pager, the verdict's way with a closed stdout, and the
//! signals, closing whatever it opened however the run ends.

use std::future::Future;

use anyhow::Result;
use tokio::sync::watch;

use crate::db::{ConnectOptions, Database};
use crate::signals::Interrupted;

/// A command whose arguments are checked: what it needs, then its run.
pub trait Command: Sized {
    /// Where it runs: the database idem opens for it, or nothing.
    type On: Place;

    /// What the run needs around it.
    fn needs(&self) -> Needs<<Self::On as Place>::Options>;

    /// The run itself, on what [`Command::needs`] asked for.
    fn run(self, on: &Self::On, given: Given) -> impl Future<Output = Result<()>>;
}

/// The common case: a command that runs on the database its plan names,
/// with nothing else around it.
pub trait OnDatabase: Sized {
    /// The database it runs against.
    fn database(&self) -> ConnectOptions;

    /// The run, on that database.
    fn run_on(self, db: &Database) -> impl Future<Output = Result<()>>;
}

impl<T: OnDatabase> Command for T {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.database())
    }

    fn run(self, db: &Database, _: Given) -> impl Future<Output = Result<()>> {
        self.run_on(db)
    }
}

/// What a command's run needs around it.
pub struct Needs<Options> {
    /// How to open the place it runs on.
    pub(crate) place: Options,
    /// Its output goes through the pager on a terminal.
    pub(crate) pager: bool,
    /// Its exit status is a verdict: once stdout's reader is gone, the rest
    /// of the output is dropped and the run goes on to its verdict.
    pub(crate) verdict: bool,
    /// What Ctrl-C or SIGTERM does to it.
    pub(crate) on_signal: OnSignal,
}

impl<Options> Needs<Options> {
    /// A plain command on `place`: no pager, no verdict, stopped by a signal.
    pub fn on(place: Options) -> Self {
        Self {
            place,
            pager: false,
            verdict: false,
            on_signal: OnSignal::Stops,
        }
    }

    /// The same, paged on a terminal when `page`.
    pub fn paged(self, page: bool) -> Self {
        Self {
            pager: page,
            ..self
        }
    }

    /// The same, its exit status a verdict.
    pub fn verdict(self) -> Self {
        Self {
            verdict: true,
            ..self
        }
    }

    /// The same, with `on_signal` for what a signal does.
    pub fn on_signal(self, on_signal: OnSignal) -> Self {
        Self { on_signal, ..self }
    }
}

/// What a signal does to a run.
#[derive(Debug, Clone, Copy)]
pub enum OnSignal {
    /// It stops the run, which is dropped; idem exits with 128 + the signal.
    Stops,
    /// It is how the run ends (a server): the run is dropped, what was
    /// opened is closed, and this line, said then, goes to stderr; exit 0.
    Ends(fn() -> String),
    /// The run is told (through [`Given::stop`]) and ends in its own way
    /// (`idem db` stops its command within a grace period).
    Tells,
}

/// What the dispatcher gives a run besides its place.
pub struct Given {
    /// Whether the pager took the output: no pauses for a reader then.
    pub paged: bool,
    /// Set once a signal arrives, for a run that [`OnSignal::Tells`].
    pub stop: Stop,
}

/// A signal, as a run that is told of it waits for it.
pub struct Stop(pub(super) watch::Receiver<Option<Interrupted>>);

impl Stop {
    /// Resolves when a signal has arrived.
    pub async fn requested(&mut self) -> Interrupted {
        loop {
            if let Some(signal) = self.0.borrow_and_update().clone() {
                return signal;
            }
            if self.0.changed().await.is_err() {
                // The dispatcher is gone, and with it any signal to come.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Where a command runs, opened before its run and closed after it.
pub trait Place: Sized {
    /// What it is opened from.
    type Options;

    /// Opens it; dropping the future abandons a half-open place, whose
    /// drop cleans up what was started.
    fn open(options: Self::Options) -> impl Future<Output = Result<Self>>;

    /// Closes it.
    fn close(self) -> impl Future<Output = Result<()>>;
}

impl Place for Database {
    type Options = ConnectOptions;

    async fn open(options: ConnectOptions) -> Result<Self> {
        Database::open(&options).await
    }

    async fn close(self) -> Result<()> {
        Database::close(self).await.map(drop)
    }
}

impl Place for crate::db::mariadb::Mariadb {
    type Options = crate::db::mariadb::MariadbOptions;

    async fn open(options: Self::Options) -> Result<Self> {
        Self::open(&options).await
    }

    async fn close(self) -> Result<()> {
        crate::db::mariadb::Mariadb::close(self).await.map(drop)
    }
}

/// Nothing to open: the command runs on its own.
pub struct Nothing;

impl Place for Nothing {
    type Options = ();

    async fn open((): ()) -> Result<Self> {
        Ok(Nothing)
    }

    async fn close(self) -> Result<()> {
        Ok(())
    }
}
