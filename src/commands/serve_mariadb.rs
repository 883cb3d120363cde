//! `idem serve --engine mariadb`: the course's app over HTTP with its awards decided on MariaDB (InnoDB), until Ctrl-C.
//!
//! The app's edges are PostgreSQL's app's (the key and body read off the
//! wire, the answer, the threads, `--on-hangup`, `--key-scope`, TLS, the
//! request log, `GET /counts`); what decides an award is a MariaDB race's
//! request ([`Served`]). A replica set, a standby and a plan for `idem
//! probe --plan` are PostgreSQL's so far, and refused in one line.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs, OnSignal};
use crate::cli::wire_commands::ServeArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::http::app::{App, Shape};
use crate::http::listener::{self, Limits};
use crate::limits::Origin;
use crate::race::mariadb::{MariadbRace, Served};
use crate::report::Output;
use crate::report::serve::{Ready, render_ready};

/// What `idem serve --engine mariadb` will do, checked before the server starts.
pub struct Plan {
    options: MariadbOptions,
    race: MariadbRace,
    /// The app's edges: the race's, with `--on-hangup` and `--key-scope`.
    shape: Shape,
    listen: SocketAddr,
    limits: Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
    out: Output,
}

pub fn plan(args: &ServeArgs) -> Result<Plan> {
    if args.replicas.is_some_and(|n| n > 1) {
        bail!("--replicas runs the app as processes on PostgreSQL so far; drop --engine mariadb");
    }
    if args.write_plan.is_some() {
        bail!("--write-plan writes a plan counted in PostgreSQL; drop --engine mariadb");
    }
    // The app's own edges, not the race's: what it does with a client that
    // leaves, and whose a key is.
    let input = args.input().with(|r| {
        r.wire.http = false;
        r.wire.replicas = None;
        r.hang_up = Default::default();
        r.shape.key_scope = None;
    });
    let race = MariadbRace::from_input(&input, Origin::Flags)?;
    // A replay sends the response stored with the key: a strategy that
    // keeps none there has nothing to send yet.
    if race.strategy == crate::strategy::StrategyKind::InsertUnique
        || race.store != crate::store::StoreKind::Table
    {
        bail!(
            "idem serve --engine mariadb replays the response stored in the key table; {} keeps \
             none there (serve it on PostgreSQL)",
            match race.store {
                crate::store::StoreKind::Table => race.strategy.spec().name.to_string(),
                _ => "--store cache".to_string(),
            }
        );
    }
    if race.cluster.is_cluster() {
        bail!("idem serve answers from one MariaDB server; drop --nodes");
    }
    let mut shape = race.settings().app_shape();
    shape.on_hangup = args.hang_up.on_hangup.unwrap_or_default();
    shape.key_scope = args.key_scope.unwrap_or_default();
    Ok(Plan {
        options: args.connect.mariadb()?,
        race,
        shape,
        listen: args.listen,
        limits: args.limits.limits(),
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(crate::http::https::server_config(cert, key)?),
            _ => None,
        },
        out: Output::from_json_flag(args.json),
    })
}

impl Command for Plan {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone()).on_signal(OnSignal::Ends(super::serve::stopped))
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        let out = self.out;
        let pooled = self.race.pool_size;
        let (listener, addr, cap) =
            super::serve::listening(&self.limits, pooled, self.listen).await?;
        let served = Served::open(db, &self.race).await?;
        let (watch, note) = super::serve::request_log(out)?;
        let threads = self.race.settings().app().threads;
        let app = App::on_engine(Arc::new(served), self.shape, threads, watch);
        let app = app.finishing_at_most(cap);
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let at = (db.database.as_str(), db.shown_url());
        let ready = Ready::on_mariadb(scheme, addr, at, self.race.settings(), cap);
        out.record(&ready, render_ready)?;
        let tls = self.tls.map(tokio_rustls::TlsAcceptor::from);
        listener::serve(Arc::new(app), listener, self.limits, cap, note, tls).await;
        Ok(())
    }
}
