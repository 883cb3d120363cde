//! `idem serve`: the course's app over HTTP, one strategy, until Ctrl-C.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio::net::TcpListener;

use super::command::{Command, Given, Needs, OnSignal};
use crate::cli::wire_commands::ServeArgs;
use crate::db::{ConnectOptions, Database};
use crate::http::app::{Handled, Watch};
use crate::http::listener::{self, Limits, Note, descriptor_limit};
use crate::limits::Origin;
use crate::race::replicas::Replicas;
use crate::race::{Race, RaceSettings};
use crate::report::Output;
use crate::report::request_log::RequestLog;
use crate::report::serve::{Ready, Served, probe_plan, render_ready, render_served};
use crate::report::width::width;

/// What `idem serve` will do, checked before the database starts.
pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    settings: RaceSettings,
    listen: SocketAddr,
    limits: Limits,
    /// `--tls-cert` and `--tls-key`, read and checked.
    tls: Option<Arc<rustls::ServerConfig>>,
    pub(crate) out: Output,
    /// `--write-plan`: where to write a plan for `idem probe --plan`.
    write_plan: Option<std::path::PathBuf>,
}

pub fn plan(args: &ServeArgs) -> Result<Plan> {
    let settings = args.input().build(Origin::Flags)?;
    if settings.app().replicas > 1 && args.tls_cert.is_some() {
        bail!(
            "--replicas forwards bytes to each app process as they come; TLS would end in one \
             of them: serve HTTPS with one process, or put a TLS proxy in front"
        );
    }
    Ok(Plan {
        db: args.connect.with_standby(&args.standby)?,
        settings,
        listen: args.listen,
        limits: args.limits.limits(),
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(crate::http::https::server_config(cert, key)?),
            _ => None,
        },
        out: Output::from_json_flag(args.json),
        write_plan: match &args.write_plan {
            Some(path) => {
                crate::files::write::check_target(path, "--write-plan")?;
                Some(path.clone())
            }
            None => None,
        },
    })
}

/// The listening socket at `listen`, its address, and how many
/// connections the app may take at once beside a pool of `pooled` (the
/// descriptor limit's room); a listener reachable from other machines is
/// warned of.
pub(super) async fn listening(
    limits: &Limits,
    pooled: usize,
    listen: SocketAddr,
) -> Result<(TcpListener, SocketAddr, usize)> {
    let Some(cap) = limits.connections_allowed(pooled) else {
        bail!(
            "the descriptor limit (ulimit -n {}) leaves no room for connections beside a pool of {pooled}; raise it",
            descriptor_limit().unwrap_or(0)
        );
    };
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("could not listen on {listen}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: idem serve listens on {addr}, reachable from other machines; the app has no authentication"
        );
    }
    Ok((listener, addr, cap))
}

/// For people, the request log: what the app tells it of each award, and
/// of its own troubles.
pub(super) fn request_log(out: Output) -> Result<(Option<Watch>, Option<Note>)> {
    let log = match out.for_people() {
        true => Some(RequestLog::start(width())?),
        false => None,
    };
    let watch = log.clone().map(|log| {
        Box::new(move |handled: Handled| log.offer(render_served(&Served::from(&handled)))) as Watch
    });
    let note = log.map(|log| Arc::new(move |said: String| log.offer(format!("{said}\n"))) as Note);
    Ok((watch, note))
}

/// Writes the plan for this app, if asked, and says where.
fn write_plan(to: Option<&std::path::Path>, ready: &Ready, out: Output) -> Result<()> {
    let Some(path) = to else {
        return Ok(());
    };
    crate::files::write::replace(path, probe_plan(ready).as_bytes(), "--write-plan")?;
    out.text(|| {
        format!(
            "a plan for it: {0} (idem probe --plan {0})\n\n",
            path.display()
        )
    })
}

/// Serves until the future is dropped (Ctrl-C, SIGTERM): every connection
/// goes with it, then the run's schema.
/// What `idem serve` says when Ctrl-C or SIGTERM stops it, the way a
/// server is stopped: by then its schema is gone, a clean end.
pub(super) fn stopped() -> String {
    let dropped = match crate::report::request_log::dropped() {
        0 => String::new(),
        n => format!(" ({n} log lines dropped: stdout did not keep up)"),
    };
    format!("idem serve: stopped; its tables are gone{dropped}")
}

impl Command for Plan {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone()).on_signal(OnSignal::Ends(stopped))
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        let out = self.out;
        let pooled = self.settings.app().pool.size();
        let (listener, addr, cap) = listening(&self.limits, pooled, self.listen).await?;
        if self.settings.app().replicas > 1 {
            return serve_replicas(self, listener, db, cap).await;
        }
        let race = Race::prepare(db, self.settings).await?;
        let (watch, note) = request_log(out)?;
        let (app, _held) = race.open_app(watch).await?;
        let app = app.finishing_at_most(cap);
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let ready = Ready::new(
            scheme,
            addr,
            &db.schema,
            db.shown_url(),
            &race.settings,
            cap,
        );
        out.record(&ready, render_ready)?;
        write_plan(self.write_plan.as_deref(), &ready, out)?;
        let tls = self.tls.map(tokio_rustls::TlsAcceptor::from);
        listener::serve(Arc::new(app), listener, self.limits, cap, note, tls).await;
        Ok(())
    }
}

/// `serve --replicas N`: the app as N processes behind the one port. The
/// processes log nothing; the ready line says where they are.
async fn serve_replicas(
    plan: Plan,
    listener: TcpListener,
    db: &Database,
    cap: usize,
) -> Result<()> {
    let addr = listener.local_addr()?;
    let limits = Limits {
        max_connections: cap,
        ..plan.limits
    };
    // What the front door can hold: two descriptors a connection.
    let cap = limits.forwarded_allowed().unwrap_or(1).min(cap);
    let replicas = Replicas::start(db, plan.settings.app(), listener, limits).await?;
    let ready = Ready::new(
        "http",
        addr,
        &db.schema,
        db.shown_url(),
        &plan.settings,
        cap,
    );
    plan.out.record(&ready, render_ready)?;
    write_plan(plan.write_plan.as_deref(), &ready, plan.out)?;
    replicas.serve().await;
    Ok(())
}
