//! A published guard, judged: the course's award behind axum-idempotent
//! (examples/axum-idempotent, a project of its own), probed over HTTP with
//! its effects counted in PostgreSQL. Keeps docs/over-the-wire.md's finding true.

use std::process::Command;

use serde_json::Value;

use crate::common;
use crate::common::app::{expected_marks, marks_of};
use crate::common::server::Server;

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// Builds the example (with its own lock file) and returns its binary.
fn build() -> std::path::PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let target = format!("{root}/target/examples");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The first time, this builds axum and its crates: cargo would
    // otherwise say only that the test has been running for a minute.
    common::say(
        "middleware: building examples/axum-idempotent, a project of its own \
         (about a minute the first time)",
    );
    let status = Command::new(cargo)
        .args(["build", "--locked", "--quiet", "--manifest-path"])
        .arg(format!("{root}/examples/axum-idempotent/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the example builds");
    format!("{target}/debug/award-behind-axum-idempotent").into()
}

/// Probes the endpoint with the draft's cases; returns the probe's report
/// and each case's mark.
fn probe(url: &str, server: &Server, headers: &[String]) -> (Value, Vec<(String, String)>) {
    let sandbox = common::Sandbox::new("middleware");
    let mut cmd = sandbox.idem();
    cmd.args(["probe", url, "--json", "--conformance", "-d", AWARD])
        .args(["--count-sql", "SELECT count(*) FROM experience_points"])
        .args(["--count-database-url", &server.url()]);
    for h in headers {
        cmd.args(["--header", h]);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "the middleware does not hold");
    let report = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(report.lines().next().unwrap()).unwrap();
    (report, marks_of(&out.stdout))
}

#[test]
fn axum_idempotent_lets_concurrent_requests_all_do_the_work() {
    let binary = build();
    let server = Server::start();
    let (_app, base) = common::app::start_example(Command::new(binary), &server.url());
    let url = format!("{base}/lessons/1/complete");

    // An API client without a session cookie: the middleware caches a
    // response only in a session, so it stores none, and every request
    // with the key does the work again, at once or later.
    let (report, got) = probe(&url, &server, &[]);
    assert_eq!(
        report["effects"]["effects"], 5,
        "five requests, five XP rows"
    );
    assert_eq!(report["statuses"], serde_json::json!({ "201": 5 }));
    assert_eq!(
        got,
        expected_marks(&["pass", "fail", "fail", "fail", "not_applicable"])
    );

    // With a session: a retry after completion is replayed, but a request
    // with another body gets the first one's response (no fingerprint),
    // and concurrent requests still all run: it looks, runs the handler,
    // then stores, with nothing in flight to see (lesson 1's shape).
    let session = session_cookie(&base);
    let (report, got) = probe(&url, &server, &[format!("Cookie: {session}")]);
    assert!(
        report["effects"]["effects"].as_i64().unwrap() > 1,
        "{report}"
    );
    assert_eq!(
        got,
        expected_marks(&["pass", "fail", "fail", "pass", "not_applicable"])
    );
}

/// `POST /session`'s cookie, `session=...`.
fn session_cookie(base: &str) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(common::app::send(
        hyper::Method::POST,
        &format!("{base}/session"),
        &[],
        "",
    ));
    let cookie = common::app::header(&answer, "set-cookie").expect("a session cookie");
    cookie.split(';').next().unwrap().to_string()
}
