//! Every answer of `idem serve`'s app on the wire: its exact status, content type and headers, as the IETF draft has them.

use std::time::{Duration, Instant};

use hyper::Method;

use crate::common::app::{Served, award, header, json, send};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// Every answer of the app, with its exact status, content type and headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_gives_every_answer_of_the_draft_on_the_wire() {
    let mut app = Served::start("serve-answers", &["-s", "guard", "--work-ms", "400"]);
    let url = app.endpoint();
    assert!(app.field("schema").starts_with("idem_"));
    assert!(app.field("url").starts_with("http://127.0.0.1:"));

    // 201 with the award, then the replay: the same status and body, marked.
    let first = award(&url, Some("\"k-1\""), AWARD).await;
    assert_eq!(first.status, 201);
    assert_eq!(header(&first, "content-type"), Some("application/json"));
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let body = json(&first);
    assert_eq!(
        (body["user_id"].as_i64(), body["amount"].as_i64()),
        (Some(42), Some(10))
    );
    assert!(body["xp_id"].as_i64().is_some());
    // A bare token is the same key as its quoted form.
    let replay = award(&url, Some("k-1"), AWARD).await;
    assert_eq!(replay.status, 201);
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body, first.body,
        "the replay is byte for byte the first response"
    );

    // 422: the same key with another body.
    let reused = award(&url, Some("\"k-1\""), r#"{"user_id": 42, "amount": 99}"#).await;
    problem(&reused, 422, "idempotency_key_reused");

    // 409 while the first request with a key is still working: sent once
    // its claim is visible, long before its 400 ms of work are done.
    let slow = tokio::spawn({
        let url = url.clone();
        async move { award(&url, Some("\"k-2\""), AWARD).await }
    });
    let counts = format!("{}/counts", app.field("url"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while json(&send(Method::GET, &counts, &[], "").await)["key_rows"] != 2 {
        assert!(
            Instant::now() < deadline,
            "the slow request never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let conflict = award(&url, Some("\"k-2\""), AWARD).await;
    problem(&conflict, 409, "idempotency_key_in_use");
    assert_eq!(header(&conflict, "retry-after"), Some("1"));
    assert_eq!(slow.await.unwrap().status, 201);

    bad_requests_are_answered_400(&url).await;
    other_routes_are_answered_405_and_404(&app, &url).await;
    let counted = send(Method::GET, &counts, &[], "").await;
    assert_eq!(counted.status, 200);
    assert_eq!(
        json(&counted),
        serde_json::json!({ "key_rows": 3, "xp_rows": 3, "service_calls": 3 })
    );

    // Ctrl-C stops it cleanly: exit 0, no cluster, no directory left.
    assert_eq!(app.stop(), Some(0));
    assert_eq!(
        app.sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A problem details answer (RFC 9457) with its status and code.
fn problem(r: &idem::http::client::Received, status: u16, code: &str) {
    let body = json(r);
    assert_eq!(r.status, status, "{body}");
    assert_eq!(header(r, "content-type"), Some("application/problem+json"));
    assert_eq!(body["status"], status);
    assert_eq!(body["code"], code);
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
}

/// 400: no key, a malformed key, a key too long, a body that is not the
/// award's; the longest key allowed is taken.
async fn bad_requests_are_answered_400(url: &str) {
    problem(
        &award(url, None, AWARD).await,
        400,
        "idempotency_key_missing",
    );
    problem(
        &award(url, Some("\"open"), AWARD).await,
        400,
        "idempotency_key_invalid",
    );
    problem(
        &award(url, Some("two words"), AWARD).await,
        400,
        "idempotency_key_invalid",
    );
    let long = format!("\"{}\"", "k".repeat(256));
    problem(
        &award(url, Some(&long), AWARD).await,
        400,
        "idempotency_key_invalid",
    );
    let longest = format!("\"{}\"", "k".repeat(255));
    assert_eq!(award(url, Some(&longest), AWARD).await.status, 201);
    problem(
        &award(url, Some("\"k-3\""), "not json").await,
        400,
        "invalid_body",
    );
    let extra = r#"{"user_id": 42, "amount": 10, "admin": true}"#;
    problem(
        &award(url, Some("\"k-3\""), extra).await,
        400,
        "invalid_body",
    );
    problem(
        &award(url, Some("\"k-3\""), r#"{"user_id": 42, "amount": 0}"#).await,
        400,
        "invalid_body",
    );
}

/// The routes around the award: 405 with `Allow`, 404 elsewhere.
async fn other_routes_are_answered_405_and_404(app: &Served, url: &str) {
    let wrong_method = send(Method::GET, url, &[], "").await;
    problem(&wrong_method, 405, "method_not_allowed");
    assert_eq!(header(&wrong_method, "allow"), Some("POST"));
    let base = app.field("url");
    problem(
        &send(Method::POST, &format!("{base}/nowhere"), &[], "").await,
        404,
        "not_found",
    );
    problem(
        &send(Method::POST, &format!("{base}/lessons/x/complete"), &[], "").await,
        404,
        "not_found",
    );
}
