//! `idem serve`: the course's app over HTTP, one strategy, until Ctrl-C.

use std::net::SocketAddr;

use anyhow::{Context, Result, bail};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::cli::ServeArgs;
use crate::db::Database;
use crate::http::app::Handled;
use crate::race::limits::Origin;
use crate::race::{Race, RaceSettings};
use crate::report::serve::{Ready, Served, render_ready, render_served};
use crate::report::{Output, emit};

/// What `idem serve` will do, checked before the database starts.
pub struct Plan {
    pub settings: RaceSettings,
    pub listen: SocketAddr,
    pub out: Output,
}

pub fn plan(args: &ServeArgs) -> Result<Plan> {
    let settings = args.input().build(Origin::Flags)?;
    if args.losers.loser.is_some() && !args.strategy.has_losers() {
        bail!(
            "--loser applies to claim-work-complete; with {} no request loses a claim",
            args.strategy
        );
    }
    Ok(Plan {
        settings,
        listen: args.listen,
        out: Output::from_json_flag(args.json),
    })
}

/// Serves until the future is dropped (Ctrl-C, SIGTERM): every connection
/// goes with it, then the run's schema.
pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let out = plan.out;
    let listener = TcpListener::bind(plan.listen)
        .await
        .with_context(|| format!("could not listen on {}", plan.listen))?;
    let addr = listener.local_addr()?;
    let race = Race::prepare(db, plan.settings).await?;
    let (log, mut logged) = mpsc::unbounded_channel::<Served>();
    let watch = out.for_people().then(|| {
        Box::new(move |handled: Handled| {
            let _ = log.send(Served::from(&handled));
        }) as crate::http::app::Watch
    });
    let (app, _held) = race.open_app(watch).await?;
    let ready = Ready::new(addr, &db.schema, db.shown_url(), &race.settings);
    out.record(&ready, render_ready)?;
    let app = std::sync::Arc::new(app);
    let served = app.serve(listener);
    // The log ends only with the app: with no log (--json) it never does.
    let printed = async {
        while let Some(line) = logged.recv().await {
            emit(&render_served(&line))?;
        }
        std::future::pending::<Result<()>>().await
    };
    tokio::select! {
        served = served => served,
        printed = printed => printed,
    }
}
