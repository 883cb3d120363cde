//! A small HTTP/1.1 API of the tests' own, with one of the failure classes of 2026 built in on purpose, or none: what the probe's new conformance cases are judged against.
//!
//! `POST /pay` with an `Idempotency-Key` does 20 ms of work and one
//! effect, counted in a file that `--count-cmd 'cat FILE'` reads; a key
//! seen before is answered from what was stored for it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// Which flaw the API has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// None: every new case holds.
    None,
    /// Serves every key behind one lock.
    OneLock,
    /// Takes a request carrying `Idempotent-Replayed: true` at its word.
    TrustsMarker,
    /// Reads the first of two key lines.
    FirstKeyLine,
    /// Leaves the query string out of its fingerprint.
    IgnoresQuery,
    /// Calls the downstream service before it claims the key.
    CallsBeforeClaim,
    /// No guard at all: every request does the work.
    NoGuard,
    /// Keeps keys by the key alone, not by method and path.
    KeyNotScoped,
    /// When the downstream service fails, lets the key go (as Powertools
    /// does) instead of storing the failure (as Stripe does).
    ReleasesOnFailure,
}

/// What a key stands for: in progress, or done with the request it was
/// done for and the body it answered.
enum Entry {
    Working,
    Done {
        asked: String,
        status: u16,
        body: String,
    },
}

struct Api {
    flaw: Flaw,
    keys: std::sync::Mutex<HashMap<String, Entry>>,
    one_lock: Mutex<()>,
    effects: AtomicU64,
    count_file: PathBuf,
    /// The downstream service its work calls, if any (`idem probe --sink`).
    sink: Option<String>,
    /// A shell command each effect also runs (a row in another database).
    on_effect: Option<String>,
}

/// The API, listening on a loopback port until the runtime ends: its base
/// URL and the file its effects are counted in.
pub fn start(flaw: Flaw, dir: &std::path::Path) -> (String, PathBuf) {
    start_at(flaw, dir, "127.0.0.1:0")
}

/// The same, listening at `addr`.
pub fn start_at(flaw: Flaw, dir: &std::path::Path, addr: &str) -> (String, PathBuf) {
    serve_at(flaw, dir, addr, None, None)
}

/// The API, its work calling the downstream service at `sink`.
pub fn start_calling(flaw: Flaw, dir: &std::path::Path, sink: &str) -> (String, PathBuf) {
    serve_at(flaw, dir, "127.0.0.1:0", Some(sink.to_string()), None)
}

/// The API, each effect also running `on_effect` (`sh -c`).
pub fn start_running(flaw: Flaw, dir: &std::path::Path, on_effect: &str) -> (String, PathBuf) {
    serve_at(flaw, dir, "127.0.0.1:0", None, Some(on_effect.to_string()))
}

fn serve_at(
    flaw: Flaw,
    dir: &std::path::Path,
    addr: &str,
    sink: Option<String>,
    on_effect: Option<String>,
) -> (String, PathBuf) {
    let count_file = dir.join(format!("effects-{flaw:?}"));
    std::fs::write(&count_file, "0\n").unwrap();
    let std_listener = std::net::TcpListener::bind(addr).unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", std_listener.local_addr().unwrap());
    let api = Arc::new(Api {
        flaw,
        keys: Default::default(),
        one_lock: Mutex::new(()),
        effects: AtomicU64::new(0),
        count_file: count_file.clone(),
        sink,
        on_effect,
    });
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        // Bounded: a test is over long before.
        runtime.block_on(async move {
            let accepting = async {
                let listener = TcpListener::from_std(std_listener).unwrap();
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(api.clone(), stream));
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(300), accepting).await;
        });
    });
    (url, count_file)
}

/// One connection, one request (the probe opens one per request).
async fn serve(api: Arc<Api>, mut stream: TcpStream) {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if bytes.len() > 64 * 1024 {
            return;
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_string();
    let length: usize = header_values(&head, "content-length")
        .first()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while bytes.len() < head_end + length.min(64 * 1024) {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&bytes[head_end..]).to_string();
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (status, answer, replayed) = api.answer(&head, &target, &body).await;
    let replay = if replayed {
        "Idempotent-Replayed: true\r\n"
    } else {
        ""
    };
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{replay}content-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
}

fn header_values(head: &str, name: &str) -> Vec<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

impl Api {
    async fn answer(&self, head: &str, target: &str, body: &str) -> (u16, String, bool) {
        if head.starts_with("GET") {
            return (200, "{}".into(), false);
        }
        let keys = header_values(head, "idempotency-key");
        let key = match (keys.len(), self.flaw) {
            (0, _) => return (400, "{\"error\":\"missing key\"}".into(), false),
            (1, _) | (_, Flaw::FirstKeyLine) => keys[0].clone(),
            _ => return (400, "{\"error\":\"two keys\"}".into(), false),
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        // A key is the caller's for one operation: kept under the path too.
        let key = match self.flaw {
            Flaw::KeyNotScoped => key,
            _ => format!("{path} {key}"),
        };
        let asked = match self.flaw {
            Flaw::IgnoresQuery => body.to_string(),
            _ => format!("{body}?{query}"),
        };
        if self.flaw == Flaw::TrustsMarker
            && header_values(head, "idempotent-replayed")
                .iter()
                .any(|v| v == "true")
        {
            return (201, "{\"replayed\":true}".into(), true);
        }
        if self.flaw == Flaw::CallsBeforeClaim {
            let _ = self.call_sink(&key).await;
        }
        if self.flaw == Flaw::NoGuard {
            return self.work(key, asked).await;
        }
        {
            let mut keys = self.keys.lock().unwrap();
            match keys.get(&key) {
                Some(Entry::Working) => return (409, "{\"error\":\"in flight\"}".into(), false),
                Some(Entry::Done {
                    asked: a,
                    status,
                    body,
                }) if *a == asked => {
                    return (*status, body.clone(), true);
                }
                Some(Entry::Done { .. }) => {
                    return (422, "{\"error\":\"other request\"}".into(), false);
                }
                None => {
                    keys.insert(key.clone(), Entry::Working);
                }
            }
        }
        self.work(key, asked).await
    }

    /// The work: 20 ms, the downstream call, one effect; stored under `key`.
    async fn work(&self, key: String, asked: String) -> (u16, String, bool) {
        let _one = match self.flaw {
            Flaw::OneLock => Some(self.one_lock.lock().await),
            _ => None,
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(cmd) = &self.on_effect {
            let run = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .status();
            let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
        }
        let provider = match self.flaw {
            Flaw::CallsBeforeClaim => None,
            _ => self.call_sink(&key).await,
        };
        if provider == Some(500) {
            let failed = "{\"error\":\"the provider failed\"}".to_string();
            let mut keys = self.keys.lock().unwrap();
            match self.flaw {
                Flaw::ReleasesOnFailure => keys.remove(&key),
                _ => keys.insert(
                    key,
                    Entry::Done {
                        asked,
                        status: 502,
                        body: failed.clone(),
                    },
                ),
            };
            return (502, failed, false);
        }
        let n = self.effects.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = std::fs::write(&self.count_file, format!("{n}\n"));
        let answer = format!("{{\"payment\":{n}}}");
        self.keys.lock().unwrap().insert(
            key,
            Entry::Done {
                asked,
                status: 201,
                body: answer.clone(),
            },
        );
        (201, answer, false)
    }

    /// Calls the downstream service, if there is one, forwarding the key;
    /// bounded by 5 s. Its status, if it answered.
    async fn call_sink(&self, key: &str) -> Option<u16> {
        let sink = self.sink.as_ref()?;
        let call = async {
            let mut stream = TcpStream::connect(sink).await.ok()?;
            let request = format!(
                "POST / HTTP/1.1\r\nhost: {sink}\r\nidempotency-key: {key}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
            );
            stream.write_all(request.as_bytes()).await.ok()?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.ok()?;
            let head = String::from_utf8_lossy(&answer);
            head.split_whitespace().nth(1)?.parse::<u16>().ok()
        };
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .ok()
            .flatten()
    }
}
