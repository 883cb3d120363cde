//! The guard over the wire: `idem serve`'s requests per second against the same guard in-process, on the same pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use hyper::Method;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use serde::Serialize;
use tokio::net::TcpListener;

use super::throughput::{Handler, measure};
use crate::db::Database;
use crate::db::pool::warm_pool;
use crate::http::app::{App, Shape};
use crate::http::client::{self, Outgoing, Target};
use crate::http::contract::{KEY_HEADER, quote_key};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::strategy::StrategyKind;

/// The guard's requests per second, over HTTP and in-process.
#[derive(Debug, Clone, Serialize)]
pub struct WireFigure {
    /// Clients, each on its own keep-alive connection, and the app's threads.
    pub clients: usize,
    pub pool_size: usize,
    pub requests: usize,
    pub http_per_second: f64,
    pub in_process_per_second: f64,
    /// `http_per_second` over `in_process_per_second`.
    pub ratio: f64,
}

/// Measures the guard both ways, one after the other, on a fresh pool each.
pub async fn against_in_process(
    db: &Database,
    clients: usize,
    pool_size: usize,
    requests: usize,
) -> Result<WireFigure> {
    let settings = RaceInput::with_strategy(StrategyKind::Guard).build(Origin::Flags)?;
    let guard: Arc<dyn crate::strategy::Strategy> = Arc::from(settings.build_strategy());
    let in_process = measure(
        db,
        "guard",
        Handler::Strategy(guard.clone(), true),
        clients,
        pool_size,
        requests,
    )
    .await?;

    db.truncate().await?;
    let pool = warm_pool(db.workers_config(), pool_size).await?;
    let shape = Shape {
        fingerprint: true,
        work: Duration::ZERO,
        checkout_timeout: Duration::from_secs(30),
        fail_work: None,
        key_scope: Default::default(),
        on_hangup: Default::default(),
    };
    let app = Arc::new(App::new(pool, guard, shape, clients, None));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let target = Target::parse(&format!(
        "http://{}/lessons/1/complete",
        listener.local_addr()?
    ))?;
    let server =
        tokio::spawn(
            async move { crate::http::listener::serve_with_defaults(app, listener).await },
        );
    let next = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (target, next) = (target.clone(), next.clone());
        tasks.spawn(async move { send_until_done(&target, &next, requests).await });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a bench client panicked")??;
    }
    let elapsed = began.elapsed().as_secs_f64();
    server.abort();
    let http_per_second = requests as f64 / elapsed;
    Ok(WireFigure {
        clients,
        pool_size,
        requests,
        http_per_second,
        in_process_per_second: in_process.per_second,
        ratio: http_per_second / in_process.per_second,
    })
}

/// One client: a keep-alive connection, awards with distinct keys until
/// `total` have been sent among all clients.
async fn send_until_done(target: &Target, next: &AtomicUsize, total: usize) -> Result<()> {
    let mut conn = client::connect(target, Duration::from_secs(10)).await?;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            return Ok(());
        }
        let award = Outgoing {
            method: Method::POST,
            path: target.path.clone(),
            headers: vec![
                (
                    HeaderName::from_static(KEY_HEADER),
                    HeaderValue::from_str(&quote_key(&format!("k{i}")))?,
                ),
                (CONTENT_TYPE, HeaderValue::from_static("application/json")),
            ],
            body: Bytes::from(format!(r#"{{"user_id": {i}, "amount": 10}}"#)),
        };
        let answer = conn.send(&award, Duration::from_secs(30)).await?;
        if answer.status != 201 {
            bail!("the app answered {} to a fresh key", answer.status);
        }
    }
}
