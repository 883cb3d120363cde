//! The front door of `--replicas`: a replica that dies is noticed, and the door's bounds mean what a single serve's mean.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::app::{KillOnDrop, award, header, json};
use crate::common::{Sandbox, first_line_then_drain, processes, psql, signal};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// `idem serve --replicas 2` with `args` (under `ulimit -n` of `files`, if
/// given), its stderr in the sandbox's `serve.err`; the ready line.
fn serve(sandbox: &Sandbox, args: &[&str], files: Option<u64>) -> (KillOnDrop, serde_json::Value) {
    let mut command = sandbox.idem_std();
    command
        .args([
            "serve",
            "--json",
            "--listen",
            "127.0.0.1:0",
            "--replicas",
            "2",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(sandbox.dir.join("serve.err")).unwrap());
    if let Some(files) = files {
        // SAFETY: setrlimit is async-signal-safe; it only lowers this child's limit.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: files,
                    rlim_max: files,
                };
                match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
    }
    let mut child = command.spawn().unwrap();
    let line = first_line_then_drain(&mut child);
    let ready = serde_json::from_str(&line).unwrap_or_else(|_| panic!("a ready line: {line:?}"));
    (KillOnDrop(child), ready)
}

fn stop(sandbox: &Sandbox, mut served: KillOnDrop) {
    signal(served.0.id(), libc::SIGINT);
    let _ = served.0.wait();
    let _ = std::fs::remove_file(sandbox.dir.join("serve.err"));
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

fn port_of(url: &str) -> u16 {
    url.strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("a loopback URL")
}

/// The first line of an answer to `request` on a fresh connection, if one
/// comes within `limit`.
fn status_line(port: u16, request: &[u8], limit: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    stream.write_all(request).ok()?;
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines().next().map(str::to_owned)
}

const COUNTS: &[u8] = b"GET /counts HTTP/1.1\r\nHost: idem\r\nConnection: close\r\n\r\n";

#[test]
fn a_killed_replica_is_noticed_and_only_the_live_one_serves() {
    let sandbox = Sandbox::new("replica-killed");
    let (served, ready) = serve(&sandbox, &["--work-ms", "1000"], None);
    let endpoint = ready["endpoint"].as_str().unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Four awards at once: two on each replica, in turn.
    let burst: Vec<_> = (1..=4)
        .map(|i| {
            let endpoint = endpoint.clone();
            runtime.spawn(
                async move { award(&endpoint, Some(&format!("\"burst-{i}\"")), AWARD).await },
            )
        })
        .collect();
    // Every award has looked for its key and is at its work.
    let url = ready["database_url"].as_str().unwrap();
    let looked = "SELECT count(*) FROM pg_stat_activity \
                  WHERE application_name = 'idem-worker' AND query LIKE '%idempotency_keys%'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while psql(url, looked) != "4" {
        assert!(
            Instant::now() < deadline,
            "the four awards reach their work"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = processes()
        .into_iter()
        .find(|p| p.ppid == Some(served.0.id()) && p.cmdline.contains("replica --number 2"))
        .expect("replica 2 runs");
    signal(second.pid, libc::SIGKILL);
    let answers: Vec<_> = burst
        .into_iter()
        .map(|t| runtime.block_on(t).unwrap())
        .collect();
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        2,
        "{statuses:?}"
    );
    let gone: Vec<_> = answers.iter().filter(|a| a.status == 502).collect();
    assert_eq!(gone.len(), 2, "{statuses:?}");
    for answer in gone {
        assert!(
            json(answer)["detail"]
                .as_str()
                .unwrap()
                .contains("replica 2"),
            "{}",
            json(answer)
        );
    }
    // From now on only replica 1 serves, every time.
    for i in 1..=3 {
        let answer = runtime.block_on(award(&endpoint, Some(&format!("\"after-{i}\"")), AWARD));
        assert_eq!(answer.status, 201, "request {i} after the kill");
        assert_eq!(header(&answer, "idem-replica"), Some("1"));
    }
    let stderr = std::fs::read_to_string(sandbox.dir.join("serve.err")).unwrap();
    assert_eq!(
        stderr.matches("replica 2 (process").count(),
        1,
        "said once: {stderr}"
    );
    stop(&sandbox, served);
}

#[test]
fn stalled_headers_through_the_front_door_are_cut_at_the_read_timeout() {
    let sandbox = Sandbox::new("front-slowloris");
    let (served, ready) = serve(
        &sandbox,
        &["--read-timeout-ms", "1000", "--max-connections", "40"],
        None,
    );
    let port = port_of(ready["url"].as_str().unwrap());
    let cap = ready["max_connections"].as_u64().unwrap();
    assert!(cap <= 40, "{cap}");
    let stalled: Vec<TcpStream> = (0..60)
        .filter_map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.write_all(b"POST /lessons/1/complete HTTP/1.1\r\nHost: idem\r\n")
                .ok()?;
            Some(s)
        })
        .collect();
    // Past the cap the door answers 503 at once; within the read timeout
    // (and a margin) the stalled ones are cut and a new client is served.
    let started = Instant::now();
    let answered = loop {
        if let Some(line) = status_line(port, COUNTS, Duration::from_secs(1))
            && line == "HTTP/1.1 200 OK"
        {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "a new client was locked out for 8 s by 60 stalled headers"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(answered < Duration::from_secs(4), "{answered:?}");
    drop(stalled);
    stop(&sandbox, served);
}

#[test]
fn an_award_still_being_worked_on_is_not_cut_as_idle_by_the_front_door() {
    let sandbox = Sandbox::new("front-working");
    let (served, ready) = serve(
        &sandbox,
        &["--work-ms", "2500", "--idle-timeout-ms", "1000"],
        None,
    );
    let endpoint = ready["endpoint"].as_str().unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(award(&endpoint, Some("\"long\""), AWARD));
    assert_eq!(answer.status, 201);
    stop(&sandbox, served);
}

#[test]
fn under_a_descriptor_limit_the_front_door_answers_503_past_its_cap_and_never_drops_a_client() {
    let sandbox = Sandbox::new("front-descriptors");
    let (served, ready) = serve(&sandbox, &[], Some(200));
    let cap = ready["max_connections"].as_u64().unwrap();
    assert!(
        cap <= (200 - 64) / 2,
        "two descriptors a forwarded connection: {cap}"
    );
    let port = port_of(ready["url"].as_str().unwrap());
    let clients: Vec<TcpStream> = (0..120)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(COUNTS).unwrap();
            s
        })
        .collect();
    let mut unanswered = 0;
    let mut refused = 0;
    for mut client in clients {
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        match client.read(&mut buf) {
            Ok(n) if n > 0 => {
                refused += usize::from(buf.starts_with(b"HTTP/1.1 503"));
            }
            _ => unanswered += 1,
        }
    }
    assert_eq!(
        unanswered, 0,
        "every client got an answer ({refused} were 503)"
    );
    stop(&sandbox, served);
}
