//! The request life's helpers come back: the heartbeat's and the ledger's connections, ended under a running `idem serve`, are opened again, and a call the ledger cannot write is never a silent zero.

use std::io::Read;

use serde_json::Value;

use crate::common::app::Served;
use crate::common::psql;

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// Ends every connection to the app's database but psql's own, as a
/// server restart or an idle timeout would, and waits until they are gone.
/// Returns how many there were.
fn end_every_connection(app: &Served) -> u32 {
    let ended = psql(
        &app.field("database_url"),
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    ended
        .parse()
        .unwrap_or_else(|_| panic!("psql answered {ended:?}"))
}

/// What serve said on stderr, once stopped.
fn said(app: &mut Served) -> String {
    assert_eq!(app.stop(), Some(0));
    let mut stderr = String::new();
    app.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

/// With the heartbeat's connection ended before the request (and every
/// other one with it), the guard's beats go on from a new one: against
/// 300 ms of work and a 100 ms stale-claim rule, the retry at 200 ms is
/// answered 409 and the service is called once, as when nothing was
/// ended. Without the heartbeat coming back, the retry takes the claim
/// over and the work runs twice.
#[test]
fn the_heartbeat_beats_again_after_its_connection_is_ended() {
    let mut app = Served::start(
        "helper-heartbeat",
        &[
            "-s",
            "guard",
            "--stale-after-ms",
            "100",
            "--work-ms",
            "300",
            "--heartbeat-ms",
            "25",
        ],
    );
    // A first request starts the beats' connection, as a running app has.
    let out = app.probe_calls(&["--json", "-d", AWARD, "-n", "1"]);
    assert_eq!(out.status.code(), Some(3), "one request is no race");
    assert!(
        end_every_connection(&app) >= 3,
        "the pool's, the beat's, the ledger's"
    );
    let out = app.probe_calls(&["--json", "-d", AWARD, "--retry-at", "200ms,1s"]);
    let line: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(line["steps"][0]["status"], 409, "{line}");
    assert_eq!(line["effects"], 1, "{line}");
    assert_eq!(out.status.code(), Some(0), "{line}");
    let stderr = said(&mut app);
    assert!(
        stderr.contains("the heartbeat lost its connection; opening another")
            && stderr.contains("the heartbeat has a connection again"),
        "{stderr}"
    );
}

/// An app with no guard does the work five times for five requests; with
/// the ledger's connection ended first, the ledger writes from a new one,
/// so the probe counting its calls sees five effects and fails, instead of
/// counting zero and passing.
#[test]
fn the_ledger_writes_again_after_its_connection_is_ended() {
    let mut app = Served::start("helper-ledger", &["-s", "none", "--work-ms", "50"]);
    let out = app.probe_calls(&["--json", "-d", AWARD, "-n", "1"]);
    assert_eq!(out.status.code(), Some(3), "one request is no race");
    assert!(end_every_connection(&app) >= 2);
    let out = app.probe_calls(&["--json", "-d", AWARD]);
    let line: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(line["effects"]["effects"], 5, "{line}");
    assert_eq!(line["verdict"]["held"], false, "{line}");
    assert_eq!(out.status.code(), Some(1));
    let stderr = said(&mut app);
    assert!(
        stderr.contains("the service's ledger lost its connection; opening another"),
        "{stderr}"
    );
}

/// A call the ledger cannot write at all (here the server refuses every
/// write to its table) is no silent zero: the request is answered 500
/// `service_call_not_recorded`, `GET /counts` says how many calls were
/// not written, and a probe that counts no effect cannot judge: exit 1.
#[test]
fn a_call_the_ledger_cannot_write_is_an_error_everyone_sees() {
    let app = Served::start("helper-unwritten", &["-s", "guard", "--work-ms", "10"]);
    let schema = app.field("schema");
    psql(
        &app.field("database_url"),
        &format!(
            "CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'the ledger is full'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON {schema}.award_calls
             FOR EACH ROW EXECUTE FUNCTION {schema}.refuse();"
        ),
    );
    let out = app.probe_calls(&["--json", "-d", AWARD]);
    let line: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(line["statuses"]["500"], 1, "{line}");
    assert_eq!(line["effects"]["effects"], 0, "{line}");
    assert_eq!(line["verdict"]["judged"], false, "{line}");
    assert_eq!(out.status.code(), Some(3));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let counts = rt.block_on(crate::common::app::send(
        hyper::Method::GET,
        &format!("{}/counts", app.field("url")),
        &[],
        "",
    ));
    let counts = crate::common::app::json(&counts);
    assert_eq!(counts["service_calls_not_written"], 1, "{counts}");
}
