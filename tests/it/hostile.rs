//! The wire under hostile peers: `idem serve` against slow, greedy and
//! unread clients; `idem probe` against servers that never stop talking,
//! redirect, or answer what HTTP does not know; count queries that try to
//! do more than count. The files idem reads and writes are files.rs's.
//!
//! Every server here listens on 127.0.0.1, every loop has a bound in count
//! and in time, and every child is stopped by the test that started it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::app::{KillOnDrop, Served};
use crate::common::{Sandbox, psql, signal};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// The port of an `http://127.0.0.1:PORT/...` URL.
fn port_of(url: &str) -> u16 {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .expect("a loopback URL");
    rest.split('/').next().unwrap().parse().unwrap()
}

/// Sends raw bytes and reads the status line of the answer, within `limit`.
fn status_line(port: u16, request: &[u8], limit: Duration) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(limit)).unwrap();
    stream.write_all(request).unwrap();
    let mut line = String::new();
    let _ = BufReader::new(stream).read_line(&mut line);
    line.trim_end().to_string()
}

const COUNTS: &[u8] = b"GET /counts HTTP/1.1\r\nHost: idem\r\n\r\n";

/// The first line of `stream`'s answer, if one came before `limit`.
fn answer_on(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 512];
    match stream.read(&mut buf) {
        Ok(n) if n > 0 => Some(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        ),
        _ => None,
    }
}

/// With one process and with two behind the front door, which holds the
/// bounds it was given and hands them to each process.
const ONE_AND_TWO_PROCESSES: [&[&str]; 2] = [&[], &["--replicas", "2"]];

#[test]
fn five_stalled_uploads_neither_freeze_the_app_nor_keep_their_connections() {
    for processes in ONE_AND_TWO_PROCESSES {
        let args = [&["--read-timeout-ms", "1000"][..], processes].concat();
        five_stalled_uploads(&Served::start("stalled-uploads", &args));
    }
}

fn five_stalled_uploads(app: &Served) {
    let port = port_of(&app.endpoint());
    // Five clients each promise 100 bytes of body, send one, and go quiet:
    // as many as the app has threads.
    let head = "POST /lessons/1/complete HTTP/1.1\r\nHost: idem\r\nIdempotency-Key: \"stall\"\r\n\
                Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
    let mut stalled: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let counts = status_line(port, COUNTS, Duration::from_secs(2));
    assert_eq!(counts, "HTTP/1.1 200 OK", "GET /counts is answered");
    assert!(asked.elapsed() < Duration::from_secs(2));
    // Each stalled upload is told it took too long, and its connection closed.
    for stream in &mut stalled {
        let line = answer_on(stream, Duration::from_secs(5));
        assert_eq!(line.as_deref(), Some("HTTP/1.1 408 Request Timeout"));
    }
}

#[test]
fn an_unread_stdout_neither_freezes_serve_nor_delays_its_stop() {
    let sandbox = Sandbox::new("unread-stdout");
    let mut child = sandbox
        .idem_std()
        .args(["serve", "--listen", "127.0.0.1:0", "--work-ms", "0"])
        .args(["-s", "insert-unique"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The ready line names the URL; after it nobody reads stdout again.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    let url = ready
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("the ready line names the URL: {ready:?}"));
    let port = port_of(url);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    // More lines than the pipe and the log's queue hold together.
    let requests = 3000;
    let mut created = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in 0..requests {
        assert!(Instant::now() < deadline, "3000 requests within 120 s");
        let request = format!(
            "POST /lessons/1/complete HTTP/1.1\r\nHost: idem\r\nIdempotency-Key: \"k-{i}\"\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{AWARD}",
            AWARD.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        if read_response(&mut reader).starts_with("HTTP/1.1 201") {
            created += 1;
        }
    }
    assert_eq!(created, requests, "every award is answered 201");
    signal(child.id(), libc::SIGTERM);
    let asked = Instant::now();
    let status = wait_within(&mut child, Duration::from_secs(1));
    assert_eq!(status, Some(0), "serve stops within 1 s of SIGTERM");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("log lines dropped: stdout did not keep up"),
        "the dropped lines are counted: {stderr}"
    );
    assert!(asked.elapsed() < Duration::from_secs(1));
    drop(stdout);
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(5)),
        Vec::<String>::new()
    );
}

/// Reads one response with a Content-Length body; returns its status line.
fn read_response(reader: &mut BufReader<TcpStream>) -> String {
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    status
}

/// The child's exit code if it exits within `limit`; killed otherwise.
fn wait_within(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn a_descriptor_flood_is_answered_503_and_serve_goes_on() {
    let sandbox = Sandbox::new("fd-flood");
    let mut command = sandbox.idem_std();
    command
        .args(["serve", "--json", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; it only lowers this child's limit.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let line = common::first_line_then_drain(&mut child);
    let mut child = KillOnDrop(child);
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    let cap = ready["max_connections"].as_u64().unwrap();
    assert!(cap < 256, "the cap leaves room under ulimit -n 256: {cap}");
    let port = port_of(ready["url"].as_str().unwrap());
    let flood: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut refused = 0;
    for stream in &flood {
        stream.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let mut s = stream;
        if let Ok(n) = s.read(&mut buf)
            && String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 503")
        {
            refused += 1;
        }
    }
    assert!(
        refused >= 400 - cap as usize,
        "{refused} of 400 were told 503 past a cap of {cap}"
    );
    assert_eq!(child.0.try_wait().unwrap(), None, "serve is still up");
    for stream in &flood {
        let _ = stream.shutdown(Shutdown::Both);
    }
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let line = status_line(port, COUNTS, Duration::from_secs(2));
        if line == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(Instant::now() < deadline, "serve answers again: {line:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(child.0.id(), libc::SIGINT);
    assert_eq!(wait_within(&mut child.0, Duration::from_secs(10)), Some(0));
}

#[test]
fn an_idle_connection_is_closed_and_a_json_array_is_no_award() {
    for processes in ONE_AND_TWO_PROCESSES {
        let args = [&["--idle-timeout-ms", "300"][..], processes].concat();
        idle_and_array(&Served::start("idle", &args));
    }
}

fn idle_and_array(app: &Served) {
    let port = port_of(&app.endpoint());
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(COUNTS).unwrap();
    assert_eq!(
        answer_on(&mut stream, Duration::from_secs(5)).as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    let quiet = Instant::now();
    assert_eq!(answer_on(&mut stream, Duration::from_secs(5)), None);
    let closed_after = quiet.elapsed();
    assert!(
        closed_after < Duration::from_secs(3),
        "closed after {closed_after:?}"
    );

    let body = "[1,2]";
    let request = format!(
        "POST /lessons/1/complete HTTP/1.1\r\nHost: idem\r\nIdempotency-Key: \"arr\"\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let line = status_line(port, request.as_bytes(), Duration::from_secs(5));
    assert_eq!(line, "HTTP/1.1 400 Bad Request");
}

#[test]
fn a_non_loopback_address_is_served_with_a_warning() {
    let sandbox = Sandbox::new("wide-listen");
    let mut child = sandbox
        .idem_std()
        .args(["serve", "--json", "--listen", "0.0.0.0:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let _ready = common::first_line_then_drain(&mut child);
    let mut warning = String::new();
    stderr.read_line(&mut warning).unwrap();
    signal(child.id(), libc::SIGINT);
    let _ = child.wait();
    assert!(
        warning.starts_with("warning: idem serve listens on 0.0.0.0:")
            && warning.contains("no authentication"),
        "{warning}"
    );
}

/// A one-connection-at-a-time HTTP server on loopback that answers every
/// request with `answer(stream)`, for at most `limit`; stops when dropped.
struct Peer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Peer {
    fn start(limit: Duration, answer: fn(&mut TcpStream, Instant)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + limit;
            while Instant::now() < until && !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        std::thread::spawn(move || {
                            stream.set_nonblocking(false).unwrap();
                            stream
                                .set_read_timeout(Some(Duration::from_secs(5)))
                                .unwrap();
                            read_head(&mut stream);
                            answer(&mut stream, until);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { port, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/pay", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads a request's head (and ignores the rest).
fn read_head(stream: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") && seen.len() < 65536 {
        match stream.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => return,
        }
    }
}

/// An answer whose chunked body never ends (until the client goes or `until`).
fn endless(stream: &mut TcpStream, until: Instant) {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head).is_err() {
        return;
    }
    let chunk = [b'7'; 65536];
    let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
    framed.extend_from_slice(&chunk);
    framed.extend_from_slice(b"\r\n");
    while Instant::now() < until {
        if stream.write_all(&framed).is_err() {
            return;
        }
    }
}

#[test]
fn an_endless_answer_is_read_no_further_than_the_limit() {
    let sandbox = Sandbox::new("endless");
    let peer = Peer::start(Duration::from_secs(20), endless);
    let mut command = sandbox.idem_std();
    command.args(["probe", &peer.url(), "-d", AWARD, "--timeout-ms", "15000"]);
    let (output, peak_kb) = crate::common::memory::run_measured(command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("with a body over 1048576 bytes"),
        "the limit is named: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(peak_kb > 0, "the probe's memory was read while it ran");
    assert!(
        peak_kb < 100 * 1024,
        "probe peaked at {peak_kb} kB reading 5 endless bodies"
    );
}

#[test]
fn redirects_and_statuses_http_does_not_know_cannot_be_judged() {
    let sandbox = Sandbox::new("odd-status");
    fn redirect(stream: &mut TcpStream, _: Instant) {
        let _ =
            stream.write_all(b"HTTP/1.1 302 Found\r\nlocation: /pay\r\ncontent-length: 0\r\n\r\n");
    }
    fn unknown(stream: &mut TcpStream, _: Instant) {
        let _ = stream.write_all(b"HTTP/1.1 999 Odd\r\ncontent-length: 2\r\n\r\n{}");
    }
    for (answer, said) in [
        (
            redirect as fn(&mut TcpStream, Instant),
            "were redirects (3xx)",
        ),
        (unknown, "status 999 is not an HTTP status"),
    ] {
        let peer = Peer::start(Duration::from_secs(20), answer);
        let out = sandbox
            .idem()
            .args(["probe", &peer.url(), "-d", AWARD, "--timeout-ms", "5000"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
        assert!(stdout.contains(said), "{said}: {stdout}");
        assert!(stderr.contains("could not judge"), "{stderr}");
    }
}

#[test]
fn a_header_is_never_shown_by_its_value() {
    let sandbox = Sandbox::new("header-secret");
    let out = sandbox
        .idem()
        .args([
            "probe",
            "http://127.0.0.1:9/x",
            "-H",
            "Authorization Bearer SECRET123",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr.contains("SECRET123"), "{stderr}");
    assert!(
        stderr.contains("--header number 1 has no colon"),
        "{stderr}"
    );

    // A short value elsewhere leaves unrelated text alone: the address in
    // the error stays readable.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = sandbox
        .idem()
        .args(["probe", &format!("http://127.0.0.1:{port}/x")])
        .args(["-H", "X-Tenant: 12", "-H", "X-Zone: 0.0.1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("could not connect to 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn a_body_from_a_file_is_bounded() {
    let sandbox = Sandbox::new("data-file");
    let big = sandbox.dir.join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(16 * 1024 * 1024 + 1)
        .unwrap();
    for (data, said) in [
        ("@/dev/zero".to_string(), "is not a regular file"),
        (
            format!("@{}", big.display()),
            "is over 16777216 bytes (16 MiB)",
        ),
    ] {
        let out = sandbox
            .idem()
            .args(["probe", "http://127.0.0.1:9/x", "--data", &data])
            .timeout(Duration::from_secs(10))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{data}: {stderr}");
    }
    std::fs::remove_file(big).unwrap();
}

/// `idem probe` at `app`, counting with `sql`; its exit code and stderr.
/// A count refused before any request exits 2 or 4; one that fails once
/// the requests have gone leaves the probe not judged, 3.
fn count_with(app: &Served, sql: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = app
        .sandbox
        .idem()
        .args(["probe", &app.endpoint(), "-d", AWARD, "-n", "2"])
        .args([
            "--count-sql",
            sql,
            "--count-database-url",
            &app.field("database_url"),
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_count_query_only_counts() {
    let app = Served::start("count-contained", &["-s", "guard"]);
    let dir = app.sandbox.dir.clone();
    let made = dir.join("made-by-count");
    let (code, stderr) = count_with(
        &app,
        &format!("COPY (SELECT 1) TO PROGRAM 'touch {}'", made.display()),
        &[],
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("must be a query"), "{stderr}");
    let (code, stderr) = count_with(
        &app,
        &format!("COPY (SELECT 1) TO '{}'", made.display()),
        &[],
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("begins with COPY"), "{stderr}");
    let (code, stderr) = count_with(&app, "SELECT 1; SELECT 2", &[]);
    assert_eq!(code, Some(4));
    assert!(stderr.contains("must be one statement"), "{stderr}");
    assert!(!made.exists(), "no count query made a file");

    // Another session of the superuser: a count cannot end it.
    let url = app.field("database_url");
    let mut victim = victim_session(&url);
    let (code, stderr) = count_with(
        &app,
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'victim'",
        &[],
    );
    // It fails only after the requests: not judged (the contract's 3).
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("superuser"),
        "the superuser is noted: {stderr}"
    );
    assert_eq!(psql(&url, VICTIMS), "1", "the other session lives");
    assert_eq!(victim.0.try_wait().unwrap(), None);

    // A count that will not end is cancelled on the server.
    let slow = "SELECT count(*) FROM (SELECT pg_sleep(600)) s";
    let (code, stderr) = count_with(&app, slow, &["--count-timeout-ms", "500"]);
    assert_eq!(code, Some(3));
    assert!(stderr.contains("cancelled on the server"), "{stderr}");
    let running = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' \
                   AND pid <> pg_backend_pid() AND state = 'active'";
    let deadline = Instant::now() + Duration::from_secs(2);
    while psql(&url, running) != "0" {
        assert!(Instant::now() < deadline, "no backend still sleeping");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A counter that wraps between the counts is no figure.
    let schema = app.field("schema");
    let wraps = format!(
        "SELECT CASE WHEN count(*) = 0 THEN 9223372036854775807 ELSE -9223372036854775808 END \
         FROM {schema}.experience_points"
    );
    let (code, stderr) = count_with(&app, &wraps, &[]);
    assert_eq!(code, Some(3));
    assert!(stderr.contains("does not fit in 64 bits"), "{stderr}");
}

/// The issue's report: a count that switched its role back to the superuser
/// (`set_config('role', ...)`) ended a session, and with dblink committed a
/// table. Inside the count's function no role can be taken back, and a
/// superuser's count reads as pg_read_all_data.
#[test]
fn a_count_cannot_take_its_role_back_nor_write_through_dblink() {
    let app = Served::start("count-role", &["-s", "guard"]);
    let url = app.field("database_url");
    let mut victim = victim_session(&url);
    let end_victim = "(SELECT count(*) FROM pg_stat_activity \
                      WHERE application_name = 'victim' AND pg_terminate_backend(pid))";
    for switch in [
        "set_config('role', 'postgres', true)",
        "set_config('role', 'none', true)",
        "set_config('session_authorization', 'postgres', true)",
    ] {
        let sql = format!("SELECT CASE WHEN {switch} IS NOT NULL THEN {end_victim} END");
        let (code, stderr) = count_with(&app, &sql, &[]);
        // The count after the requests failed: not judged (the contract's 3).
        assert_eq!(code, Some(3), "{switch}: {stderr}");
        assert!(
            stderr.contains("within security-definer function"),
            "{switch}: {stderr}"
        );
        assert_eq!(
            psql(&url, VICTIMS),
            "1",
            "{switch}: the other session lives"
        );
    }
    // Without a switch, pg_read_all_data may not end a superuser's session.
    let (code, stderr) = count_with(&app, &format!("SELECT {end_victim}"), &[]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(psql(&url, VICTIMS), "1", "the other session lives");
    assert_eq!(victim.0.try_wait().unwrap(), None);

    // dblink, with and without the switch, writes nothing.
    psql(&url, "CREATE EXTENSION IF NOT EXISTS dblink");
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM pg_extension WHERE extname = 'dblink'"
        ),
        "1"
    );
    let write = format!(
        "dblink_exec('{}', 'CREATE TABLE public.made_by_count (x int)')",
        url.replace('\'', "''")
    );
    for sql in [
        format!("SELECT length({write})::bigint"),
        format!(
            "SELECT CASE WHEN set_config('role', 'postgres', true) IS NOT NULL \
             THEN length({write})::bigint END"
        ),
    ] {
        let (code, stderr) = count_with(&app, &sql, &[]);
        assert_eq!(code, Some(3), "{sql}: {stderr}");
    }
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM pg_class WHERE relname = 'made_by_count'"
        ),
        "0",
        "no table was made through dblink"
    );
    psql(&url, "DROP EXTENSION dblink");

    // A count that takes an advisory lock is refused, and the lock let go.
    let (code, stderr) = count_with(
        &app,
        "SELECT count(*) FROM (SELECT pg_try_advisory_lock(4242)) s",
        &[],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("took 1 advisory lock (released)"),
        "{stderr}"
    );

    // An honest count still counts, and the probe still judges.
    let (code, stderr) = count_with(
        &app,
        &format!(
            "SELECT count(*) FROM {}.experience_points",
            app.field("schema")
        ),
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
}

/// Counts the sessions that [`victim_session`] starts.
const VICTIMS: &str = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'victim'";

/// Another session of the URL's superuser, sleeping, for a count to try to end.
fn victim_session(url: &str) -> KillOnDrop {
    let victim = KillOnDrop(
        Command::new("psql")
            .arg(url)
            .args([
                "-Atc",
                "SET application_name = 'victim'; SELECT pg_sleep(30)",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while psql(url, VICTIMS) != "1" {
        assert!(Instant::now() < deadline, "the victim session starts");
        std::thread::sleep(Duration::from_millis(20));
    }
    victim
}

/// The issue's report: HTTP/2 connections that only send PINGs held every
/// connection slot for ever. PINGs are not activity; the idle cut comes.
#[test]
fn an_http2_connection_that_only_pings_is_closed_as_idle() {
    let app = Served::start("ping-only", &["--idle-timeout-ms", "500"]);
    let port = port_of(&app.endpoint());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let lasted = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (_send, mut connection) = h2::client::handshake(tcp).await.unwrap();
        let mut pings = connection.ping_pong().expect("a PING handle");
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let opened = Instant::now();
        while opened.elapsed() < Duration::from_secs(10) {
            let pong =
                tokio::time::timeout(Duration::from_secs(2), pings.ping(h2::Ping::opaque())).await;
            if !matches!(pong, Ok(Ok(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        driver.abort();
        opened.elapsed()
    });
    assert!(
        lasted < Duration::from_secs(4),
        "a PING-only connection lasted {lasted:?} with a 500 ms idle timeout"
    );
}
