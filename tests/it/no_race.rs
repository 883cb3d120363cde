//! A probe that did not race does not judge: a server that takes one HTTP/2 stream at a time, one that says GOAWAY after the first, and a client out of descriptors are reported as what happened, never as "held".

use std::os::unix::process::CommandExt;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;

use crate::common::app::{Served, award};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// How the test's HTTP/2 front misbehaves.
#[derive(Clone, Copy)]
enum Front {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS = 1`.
    OneStream,
    /// GOAWAY once the first stream is in.
    GoAwayAfterFirst,
}

/// An h2c server on a loopback port that hands every request it takes to
/// `endpoint` (a guard-less `idem serve`, so every request it passes is an
/// effect), answering with what that gave. It serves `connections`
/// connections, one after the other.
async fn front(
    front: Front,
    endpoint: String,
    connections: usize,
) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(async move {
        for _ in 0..connections {
            let Ok(Ok((tcp, _))) =
                tokio::time::timeout(Duration::from_secs(30), listener.accept()).await
            else {
                return;
            };
            serve_one(front, tcp, &endpoint).await;
        }
    });
    (port, serving)
}

/// One connection of [`front`]'s.
async fn serve_one(front: Front, tcp: tokio::net::TcpStream, endpoint: &str) {
    let mut builder = h2::server::Builder::new();
    if let Front::OneStream = front {
        builder.max_concurrent_streams(1);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(tcp).await else {
        return;
    };
    let mut taken = 0;
    let mut answering = tokio::task::JoinSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(Ok((request, respond)))) =
        tokio::time::timeout_at(deadline, conn.accept()).await
    {
        taken += 1;
        if taken > 1 && matches!(front, Front::GoAwayAfterFirst) {
            continue;
        }
        let key = request
            .headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        answering.spawn(pass_on(
            request.into_body(),
            respond,
            endpoint.to_owned(),
            key,
        ));
        if let Front::GoAwayAfterFirst = front {
            conn.graceful_shutdown();
        }
    }
    while answering.join_next().await.is_some() {}
}

/// Reads one request's body, sends it on as an award, and answers with the status.
async fn pass_on(
    mut body: h2::RecvStream,
    mut respond: SendResponse<Bytes>,
    endpoint: String,
    key: Option<String>,
) {
    let mut data = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let answer = award(&endpoint, key.as_deref(), &String::from_utf8_lossy(&data)).await;
    let response = hyper::Response::builder()
        .status(answer.status)
        .body(())
        .unwrap();
    if let Ok(mut send) = respond.send_response(response, false) {
        let _ = send.send_data(answer.body, true);
    }
}

/// `idem probe` at the front on `port` over h2c, counting `app`'s XP rows.
fn probe_through(app: &Served, port: u16, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = app
        .sandbox
        .idem()
        .args([
            "probe",
            &format!("http://127.0.0.1:{port}/lessons/1/complete"),
        ])
        .args([
            "-d",
            AWARD,
            "--http2-prior-knowledge",
            "--timeout-ms",
            "5000",
        ])
        .args(app.count_args())
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_server_that_takes_one_stream_at_a_time_is_not_judged_held() {
    let app = Served::start("one-stream", &["-s", "none"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (port, serving) = runtime.block_on(front(Front::OneStream, app.endpoint(), 1));
    let (code, stdout, stderr) = probe_through(&app, port, &[]);
    runtime.block_on(serving).unwrap();
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(!stdout.contains("held"), "{stdout}");
    assert!(
        stdout.contains("not judged: only 1 of 5 requests was sent")
            && stdout.contains("1 stream at a time"),
        "{stdout}"
    );
    assert!(stderr.contains("could not judge"), "{stderr}");
}

#[test]
fn bursts_that_were_no_race_are_counted_apart() {
    let app = Served::start("one-stream-runs", &["-s", "none"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (port, serving) = runtime.block_on(front(Front::OneStream, app.endpoint(), 3));
    let (code, stdout, stderr) = probe_through(&app, port, &["--runs", "3"]);
    runtime.block_on(serving).unwrap();
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("(judged 0 of 3)"), "{stdout}");
    assert!(stdout.contains("not judged in 3"), "{stdout}");
    assert!(!stdout.contains("held in 3"), "{stdout}");
    assert!(stderr.contains("could not judge"), "{stderr}");
}

#[test]
fn a_server_that_says_goaway_after_one_stream_is_not_judged_held() {
    let app = Served::start("goaway", &["-s", "none"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (port, serving) = runtime.block_on(front(Front::GoAwayAfterFirst, app.endpoint(), 1));
    let (code, stdout, stderr) = probe_through(&app, port, &["--json"]);
    runtime.block_on(serving).unwrap();
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    let result: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        result["effects"]["effects"], 1,
        "one request got through: {result}"
    );
    assert_eq!(result["verdict"]["judged"], false, "{result}");
    assert_eq!(
        result["verdict"]["held"],
        serde_json::Value::Null,
        "{result}"
    );
    let summary = result["verdict"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("4 of 5 requests got no answer"),
        "{summary}"
    );
}

#[test]
fn requests_that_fail_on_the_clients_side_are_not_judged() {
    // Out of descriptors: most of 300 requests never leave this machine.
    let app = Served::start("out-of-descriptors", &["-s", "guard"]);
    let out = unsafe {
        app.sandbox
            .idem_std()
            .args(["probe", &app.endpoint(), "-d", AWARD, "-n", "300"])
            .pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 128,
                    rlim_max: 128,
                };
                match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            })
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(!stdout.contains("statuses are consistent"), "{stdout}");
    assert!(stdout.contains("not judged: only"), "{stdout}");
    assert!(stderr.contains("could not judge"), "{stderr}");
}
