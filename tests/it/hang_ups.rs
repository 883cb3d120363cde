//! A request that goes away mid-award (the client hangs up, its HTTP/2 stream is reset): no connection goes back to the pool inside its transaction, and no key is left wedged.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::common::app::{Served, award, json};
use crate::common::psql;

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// The app's sessions idle inside a transaction nobody will finish.
const IDLE_IN_TRANSACTION: &str = "SELECT count(*) FROM pg_stat_activity \
     WHERE application_name = 'idem-worker' AND state LIKE 'idle in transaction%'";

/// Waits at most `limit` for none of the app's sessions to be idle in a
/// transaction, and says whether that came.
fn no_session_idle_in_transaction(url: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if psql(url, IDLE_IN_TRANSACTION) == "0" {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits at most 10 s for `n` of the app's sessions to be inside the
/// work: a transaction begun, its statements sent.
fn working(url: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let sql = "SELECT count(*) FROM pg_stat_activity \
               WHERE application_name = 'idem-worker' AND xact_start IS NOT NULL";
    while psql(url, sql) != n.to_string() {
        assert!(Instant::now() < deadline, "{n} requests began their work");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn retried_to_a_final_answer(endpoint: &str, key: &str) -> u16 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(award(endpoint, Some(key), AWARD));
    answer.status
}

#[test]
fn a_client_that_hangs_up_mid_award_leaves_no_transaction_and_no_wedged_key() {
    // The issue's report: the award is in its transaction (the blocking
    // loser's) when its client goes away.
    let app = Served::start(
        "hang-up",
        &[
            "-s",
            "claim-work-complete",
            "--loser",
            "block",
            "--work-ms",
            "1500",
            "--pool-size",
            "1",
        ],
    );
    let url = app.field("database_url");
    let port: u16 = app
        .endpoint()
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("a loopback endpoint");
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        client,
        "POST /lessons/1/complete HTTP/1.1\r\nHost: idem\r\nIdempotency-Key: \"gone\"\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{AWARD}",
        AWARD.len()
    )
    .unwrap();
    working(&url, 1);
    drop(client);
    assert!(
        no_session_idle_in_transaction(&url, Duration::from_secs(5)),
        "a connection went back to the pool inside the gone request's transaction"
    );
    // The claim was in the rolled-back transaction: the retry does the work.
    let status = retried_to_a_final_answer(&app.endpoint(), "\"gone\"");
    assert_eq!(status, 201, "the retry of a gone request's key");
    let counts = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(crate::common::app::send(
            hyper::Method::GET,
            &app.endpoint().replace("/lessons/1/complete", "/counts"),
            &[],
            "",
        ));
    assert_eq!(json(&counts)["xp_rows"], 1);
    assert_eq!(json(&counts)["key_rows"], 1);
    let pending = format!(
        "SELECT count(*) FROM {}.idempotency_keys WHERE status = 'pending'",
        app.field("schema")
    );
    assert_eq!(psql(&url, &pending), "0", "no key is left pending");
}

#[test]
fn five_reset_streams_leave_no_transaction_and_each_key_is_awarded_on_retry() {
    let app = Served::start(
        "reset-streams",
        &[
            "-s",
            "claim-work-complete",
            "--loser",
            "block",
            "--work-ms",
            "1500",
        ],
    );
    let url = app.field("database_url");
    let endpoint = app.endpoint();
    let authority = endpoint
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let keys: Vec<String> = (1..=5).map(|i| format!("\"reset-{i}\"")).collect();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let (send, connection) = h2::client::handshake(tcp).await.unwrap();
        let driver = tokio::spawn(connection);
        let mut streams = Vec::new();
        for key in &keys {
            let mut ready = send.clone().ready().await.unwrap();
            let request = hyper::Request::post(format!("http://{authority}/lessons/1/complete"))
                .header("idempotency-key", key.as_str())
                .header("content-type", "application/json")
                .body(())
                .unwrap();
            let (response, mut stream) = ready.send_request(request, false).unwrap();
            stream.send_data(Bytes::from(AWARD), true).unwrap();
            streams.push((response, stream));
        }
        let at = url.clone();
        tokio::task::spawn_blocking(move || working(&at, 5))
            .await
            .unwrap();
        for (_, stream) in &mut streams {
            stream.send_reset(h2::Reason::CANCEL);
        }
        // The resets go out; the connection itself stays open.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let at = url.clone();
        let clean = tokio::task::spawn_blocking(move || {
            no_session_idle_in_transaction(&at, Duration::from_secs(5))
        })
        .await
        .unwrap();
        assert!(
            clean,
            "reset streams left pooled connections in open transactions"
        );
        drop(streams);
        drop(send);
        driver.abort();
    });
    for key in &keys {
        let answer = runtime.block_on(award(&endpoint, Some(key), AWARD));
        assert_eq!(answer.status, 201, "{key}'s retry");
    }
    let pending = format!(
        "SELECT count(*) FROM {}.idempotency_keys WHERE status = 'pending'",
        app.field("schema")
    );
    assert_eq!(psql(&url, &pending), "0", "no key is left pending");
}

/// `race --http --hang-up`: the client of the first worker to start its
/// work hangs up halfway through it, then retries while it is answered 409.
/// What its request leaves is the app's way with a hang-up and the
/// strategy's: the guard's abandoned claim (cancel) goes stale and the
/// retry takes it over (one XP row, the service called twice: the first
/// call stands); claim-work-complete's stays pending for good (no XP row,
/// the retry gives up: the key is stuck); under finish the request
/// completes and the retry gets its response replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_work_leaves_what_the_app_and_strategy_make_of_it() {
    use idem::db::{ConnectOptions, Database};
    use idem::http::app::OnHangup;
    use idem::race::fault::FaultPoint;
    use idem::race::options::RaceInput;
    use idem::race::{CrashPlan, Outcome};
    use idem::strategy::StrategyKind;

    use crate::common::Built;
    use crate::common::races::race;

    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let hang_up = |strategy: StrategyKind, on_hangup: OnHangup| {
        RaceInput::default().with(|r| {
            r.strategy.strategy = Some(strategy);
            r.wire.http = true;
            r.app.work_ms = Some(200);
            r.guard.stale_after_ms = Some(500);
            r.hang_up.on_hangup = Some(on_hangup);
            r.faults.hang_up = Some(CrashPlan {
                worker: None,
                at: FaultPoint::DuringWork,
            });
        })
    };
    let retry_of = |r: &idem::race::RaceResult| {
        assert_eq!(r.count(Outcome::HungUp), 1, "one client hung up");
        r.reports.iter().find(|w| w.retry).cloned().unwrap()
    };

    let guard = race(&db, hang_up(StrategyKind::Guard, OnHangup::Cancel).built()).await;
    let retry = retry_of(&guard);
    assert_eq!((retry.status, retry.outcome), (201, Outcome::Created));
    assert!(retry.did.starts_with("after "), "409s first: {}", retry.did);
    assert_eq!((guard.xp_rows, guard.pending_key_rows), (1, 0));
    assert_eq!(guard.service_calls, 2, "the abandoned call stands");

    let stuck = race(
        &db,
        hang_up(StrategyKind::ClaimWorkComplete, OnHangup::Cancel).built(),
    )
    .await;
    let retry = retry_of(&stuck);
    assert_eq!(retry.status, 409);
    assert!(retry.did.contains("the key is stuck"), "{}", retry.did);
    assert_eq!((stuck.xp_rows, stuck.pending_key_rows), (0, 1));

    let finished = race(
        &db,
        hang_up(StrategyKind::ClaimWorkComplete, OnHangup::Finish).built(),
    )
    .await;
    let retry = retry_of(&finished);
    assert_eq!((retry.status, retry.outcome), (201, Outcome::Replayed));
    assert_eq!((finished.xp_rows, finished.pending_key_rows), (1, 0));
    let gone = finished
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::HungUp)
        .unwrap();
    assert!(gone.did.contains("the app went on"), "{}", gone.did);
    assert_eq!(finished.service_calls, 1);
    db.close().await.unwrap();
}
