//! `idem replica` (hidden): one process of the course's app among `--replicas`, in its parent's schema, driven on stdin.
//!
//! The parent starts it with the race's settings, reads one JSON line on its
//! stdout (`{"replica": N, "url": ...}`), and then talks in lines: `calls`
//! is answered with the award service's calls since the last `forget`, and
//! `forget` empties what the strategy keeps in this process (the memory
//! guard's map) and answers `ok`. When stdin closes, the parent is gone
//! and the replica ends; it never drops the schema, which is the parent's.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::command::OnDatabase;
use crate::cli::wire_commands::ReplicaArgs;
use crate::db::{ConnectOptions, Database};
use crate::http::listener::{self, Limits};
use crate::race::options::RaceInput;
use crate::race::{App, Race, RaceSettings};
use crate::request::service::ServiceCalls;

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    number: usize,
    settings: RaceSettings,
    limits: Limits,
}

pub fn plan(args: &ReplicaArgs) -> Result<Plan> {
    let app: App =
        serde_json::from_str(&args.input).context("the replica's settings are not valid")?;
    let settings = RaceInput::replica(app)?;
    Ok(Plan {
        db: args.connect.options_in(&args.schema),
        number: args.number,
        settings,
        limits: args.limits.limits(),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("could not listen on a loopback port")?;
        let addr = listener.local_addr()?;
        let race = Race::prepare(db, self.settings).await?;
        let service = ServiceCalls::default();
        let replica = race.replica_app(self.number, service.clone()).await?;
        let strategy = replica.strategy.clone();
        let app = replica.app;
        let mut out = tokio::io::stdout();
        let ready = serde_json::json!({ "replica": self.number, "url": format!("http://{addr}") });
        out.write_all(format!("{ready}\n").as_bytes()).await?;
        out.flush().await?;
        let limits = self.limits;
        let serving = listener::serve(
            Arc::new(app),
            listener,
            limits,
            limits.max_connections,
            None,
            None,
        );
        let driven = async {
            let mut lines = BufReader::new(tokio::io::stdin()).lines();
            let mut since = 0;
            while let Ok(Some(line)) = lines.next_line().await {
                let said = match line.trim() {
                    "calls" => (service.count() - since).to_string(),
                    "forget" => {
                        strategy.forget();
                        since = service.count();
                        "ok".to_string()
                    }
                    other => format!("unknown command {other:?}"),
                };
                out.write_all(format!("{said}\n").as_bytes()).await?;
                out.flush().await?;
            }
            anyhow::Ok(())
        };
        let _held = replica.held;
        tokio::select! {
            () = serving => Ok(()),
            driven = driven => driven,
        }
    }
}
