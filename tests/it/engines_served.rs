//! `idem serve --engine mariadb`: the course's app with its awards decided on InnoDB, called over HTTP, raced by `idem probe` and counted in the app's own database, and gone after Ctrl-C.

use hyper::Method;
use serde_json::Value;

use crate::common::app::{Served, award, header, json, send};

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// One award, its replay (the stored response, marked replayed), the same
/// key with another amount (422), and `GET /counts` saying what the
/// tables and the service saw: one key, one XP row, one call.
#[tokio::test]
async fn the_app_on_innodb_answers_replays_and_refuses_as_on_postgres() {
    let mut app = Served::start("engines-served", &["--engine", "mariadb", "-s", "guard"]);
    assert_eq!(app.ready["engine"], "mariadb", "{}", app.ready);
    let url = app.endpoint();
    let first = award(&url, Some("\"k1\""), AWARD).await;
    assert_eq!(first.status, 201);
    let made = json(&first);
    let again = award(&url, Some("\"k1\""), AWARD).await;
    assert_eq!(again.status, 201);
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(json(&again), made, "the replay is the stored response");
    let other = award(&url, Some("\"k1\""), r#"{"user_id": 42, "amount": 20}"#).await;
    assert_eq!(other.status, 422);
    let base = app.field("url");
    let counts = send(Method::GET, &format!("{base}/counts"), &[], "").await;
    assert_eq!(
        json(&counts),
        serde_json::json!({ "key_rows": 1, "xp_rows": 1, "service_calls": 1 })
    );
    assert_eq!(app.stop(), Some(0));
    assert_eq!(app.sandbox.leftovers(), Vec::<String>::new());
}

/// `idem probe` races five identical requests at the app on InnoDB and
/// counts the XP rows with the ready line's query, in the app's database
/// over its socket: the guard makes one, check-then-store more than one
/// (every request has a connection of its own over HTTP).
#[test]
fn probe_counts_the_app_on_innodb_through_its_database() {
    for (strategy, held) in [("guard", true), ("check-then-store", false)] {
        let app = Served::start(
            "engines-served-probe",
            &["--engine", "mariadb", "-s", strategy],
        );
        let out = app.probe(&["--json", "-d", AWARD]);
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{strategy}: {}", String::from_utf8_lossy(&out.stderr)));
        let counted = report["effects"]["effects"].as_i64().unwrap();
        match held {
            true => assert_eq!(counted, 1, "{strategy}: {report}"),
            false => assert!(counted > 1, "{strategy}: {report}"),
        }
        assert_eq!(report["verdict"]["held"], held, "{strategy}: {report}");
    }
}
