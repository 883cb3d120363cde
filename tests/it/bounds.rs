//! Bounds that hold what they promise: requests left running by clients that went away, and `probe --timeout-ms` over the whole probe.

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use hyper::Method;

use crate::common::Sandbox;
use crate::common::app::{Served, json, send};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// `serve --on-hangup finish` with a cap of 10 connections: 30 clients
/// that each hang up at once leave at most 10 requests running (the rest
/// are never started), so the next client is answered at once (503, with
/// Retry-After) instead of waiting behind 30 requests of 2 s of work on
/// five threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_whose_clients_left_are_bounded_with_on_hangup_finish() {
    let app = Served::start(
        "finish-bound",
        &[
            "-s",
            "none",
            "--on-hangup",
            "finish",
            "--work-ms",
            "2000",
            "--max-connections",
            "10",
        ],
    );
    let url = app.endpoint();
    for n in 0..30 {
        let key = format!("left-{n}");
        let headers = [("idempotency-key", key.as_str())];
        // The client goes away 50 ms in: its future (and connection) dropped.
        let _ = tokio::time::timeout(
            Duration::from_millis(50),
            send(Method::POST, &url, &headers, AWARD),
        )
        .await;
    }
    let began = Instant::now();
    let answered = send(Method::POST, &url, &[("idempotency-key", "next")], AWARD).await;
    let waited = began.elapsed();
    assert!(
        waited < Duration::from_secs(1),
        "the next client waited {waited:?}"
    );
    assert_eq!(
        answered.status,
        503,
        "{}",
        String::from_utf8_lossy(&answered.body)
    );
    let problem = json(&answered).to_string();
    assert!(problem.contains("too_many_running"), "{problem}");
    let retry_after = answered
        .headers
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(retry_after.as_deref(), Some("1"));
    // Once they end, the app takes requests again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = send(Method::POST, &url, &[("idempotency-key", "later")], AWARD).await;
        if r.status == 201 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the app never took a request again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A server that accepts connections and never answers, for 30 s at most.
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        let mut held = Vec::new();
        while Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
            for stream in &mut held {
                let mut sink = [0u8; 4096];
                let _ = stream.set_nonblocking(true);
                let _ = stream.read(&mut sink);
            }
        }
    });
    port
}

/// `--timeout-ms` bounds the whole probe: five bursts at a silent server
/// end within it (not five times it), in one line that says so; and a
/// wait the probe is asked for past it is refused before anything is sent.
#[test]
fn probe_timeout_bounds_the_whole_probe() {
    let sandbox = Sandbox::new("probe-whole");
    let url = format!("http://127.0.0.1:{}/pay", silent_server());
    let began = Instant::now();
    let out = sandbox
        .idem()
        .args([
            "probe",
            &url,
            "-d",
            AWARD,
            "--runs",
            "5",
            "--timeout-ms",
            "2000",
        ])
        .output()
        .unwrap();
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        took < Duration::from_millis(3500),
        "the probe took {took:?}"
    );
    assert!(
        stderr.contains("did not finish within --timeout-ms 2000"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    for (args, said) in [
        (
            vec!["--conformance", "--settle-ms", "20000"],
            "--settle-ms 20000 is past --timeout-ms 2000",
        ),
        (
            vec![
                "--retry-at",
                "5s",
                "--count-sql",
                "SELECT 1",
                "--count-database-url",
                "postgres://nobody@127.0.0.1:1/none",
            ],
            "--retry-at 5000 ms is past --timeout-ms 2000",
        ),
    ] {
        let began = Instant::now();
        // A wrong command line: 2, the probe's contract.
        let line = crate::common::refused_in_one_line_with(
            sandbox
                .idem()
                .args(["probe", &url, "-d", AWARD, "--timeout-ms", "2000"])
                .args(&args),
            2,
        );
        assert!(line.contains(said), "{line}");
        assert!(began.elapsed() < Duration::from_secs(1));
    }
}
