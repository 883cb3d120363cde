//! `idem serve` as the tests run it: a child process on a free loopback port, stopped with Ctrl-C.

use std::process::{Child, Stdio};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use hyper::header::{HeaderName, HeaderValue};
use idem::http::client::{self, Outgoing, Received, Target};
use serde_json::Value;

use super::{Sandbox, first_line_then_drain, signal};

/// A running `idem serve`; stopped (SIGINT) when dropped, if not before.
pub struct Served {
    pub child: Child,
    /// The ready line: `url`, `endpoint`, `schema`, `database_url`, `count_sql`, ...
    pub ready: Value,
    pub sandbox: Sandbox,
}

impl Served {
    /// Starts `idem serve --json --listen 127.0.0.1:0` with `args`.
    pub fn start(name: &str, args: &[&str]) -> Self {
        let sandbox = Sandbox::new(name);
        let mut child = sandbox
            .idem_std()
            .args(["serve", "--json", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("idem serve starts");
        let line = first_line_then_drain(&mut child);
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("idem serve's ready line is JSON: {line:?}"));
        Self {
            child,
            ready,
            sandbox,
        }
    }

    pub fn field(&self, name: &str) -> String {
        self.ready[name]
            .as_str()
            .unwrap_or_else(|| panic!("the ready line has {name}"))
            .to_string()
    }

    /// The award endpoint.
    pub fn endpoint(&self) -> String {
        self.field("endpoint")
    }

    /// `--count-sql` and `--count-database-url` for this app's XP rows.
    pub fn count_args(&self) -> Vec<String> {
        vec![
            "--count-sql".into(),
            self.field("count_sql"),
            "--count-database-url".into(),
            self.field("database_url"),
        ]
    }

    /// Stops the server as a user would, and returns its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        signal(self.child.id(), libc::SIGINT);
        self.child.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// Sends one request to `url` on a fresh connection.
pub async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Received {
    let target = Target::parse(url).unwrap();
    let headers = headers
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect();
    let outgoing = Outgoing {
        method,
        path: target.path.clone(),
        headers,
        body: Bytes::from(body.to_owned()),
    };
    client::once(&target, &outgoing, Duration::from_secs(30))
        .await
        .expect("the app answers")
}

/// An award with `key` (already in its wire form, or none) and `body`.
pub async fn award(url: &str, key: Option<&str>, body: &str) -> Received {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    send(Method::POST, url, &headers, body).await
}

/// A response's header, as text.
pub fn header<'a>(r: &'a Received, name: &str) -> Option<&'a str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A response's body as JSON.
pub fn json(r: &Received) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| panic!("a JSON body: {}", String::from_utf8_lossy(&r.body)))
}

impl Served {
    /// `idem probe` at this app's endpoint, counting its XP rows, with `args`.
    pub fn probe(&self, args: &[&str]) -> std::process::Output {
        self.probe_counting("count_sql", args)
    }

    /// `idem probe` at this app's endpoint, counting the award service's
    /// calls (the work that ran, rolled back or not), with `args`.
    pub fn probe_calls(&self, args: &[&str]) -> std::process::Output {
        self.probe_counting("calls_sql", args)
    }

    /// `idem probe` counting with the ready line's query `which`.
    fn probe_counting(&self, which: &str, args: &[&str]) -> std::process::Output {
        self.sandbox
            .idem()
            .args(["probe", &self.endpoint()])
            .args(["--count-sql", &self.field(which)])
            .args(["--count-database-url", &self.field("database_url")])
            .args(args)
            .output()
            .expect("idem probe runs")
    }
}

/// The (case, mark) of the draft's checks in JSON Lines output, in order,
/// but the in-flight and abort cases, whose marks depend on the server's
/// timing and on what it does with a request whose client left (their own
/// tests give the server a wide window).
pub fn marks_of(stdout: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("mark").is_some())
        .map(|v| {
            (
                v["case"].as_str().unwrap().to_owned(),
                v["mark"].as_str().unwrap().to_owned(),
            )
        })
        .filter(|(case, _)| DRAFT_CASES.contains(&case.as_str()))
        .collect()
}

/// The draft's cases whose marks do not hang on the server's timing, in
/// their order (the failure classes after them have their own tests).
const DRAFT_CASES: [&str; 5] = [
    "missing key",
    "same key, other body",
    "concurrent, same key",
    "retry after completion",
    "another caller, same key",
];

/// The cases with the marks expected of them, in their order: the
/// challenge's four, or the probe's five (the fifth, another caller).
pub fn expected_marks(marks: &[&str]) -> Vec<(String, String)> {
    assert!(marks.len() <= DRAFT_CASES.len());
    DRAFT_CASES
        .iter()
        .zip(marks)
        .map(|(c, m)| (c.to_string(), m.to_string()))
        .collect()
}

/// A child process killed when this goes out of scope (a learner's app).
pub struct KillOnDrop(pub Child);

/// A learner's example app (`app`, not yet started) run against the
/// server at `database_url` on a free port: the app and the base URL its
/// first line names ("listening on http://...").
pub fn start_example(mut app: std::process::Command, database_url: &str) -> (KillOnDrop, String) {
    let mut child = app
        .env("DATABASE_URL", database_url)
        .env("PORT", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line_then_drain(&mut child);
    let child = KillOnDrop(child);
    let base = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the app says where it listens: {line:?}"))
        .to_string();
    (child, base)
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
