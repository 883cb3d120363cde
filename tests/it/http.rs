//! Over the wire: `idem race --http`'s figures, `idem probe` (effects
//! counted in the database) and the challenge over HTTP; serve's every
//! answer is in serve_answers.rs.
//!
//! All traffic stays on loopback. Figures that depend on timing are asserted
//! as rates over many runs, as the in-process races are.

use idem::db::{ConnectOptions, Database};
use idem::probe::cases::names;
use idem::race::options::RaceInput;
use idem::race::{Outcome, Transport};
use idem::strategy::StrategyKind;
use serde_json::Value;

use crate::common;
use crate::common::Built;
use crate::common::TIMING;
use crate::common::app::{Served, expected_marks, marks_of};
use crate::common::races::races;

fn over_http(strategy: StrategyKind) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy = Some(strategy);
        r.wire.http = true;
    })
}

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// The course's figures, over the wire: asserted as rates over 100 runs
/// each (measured here: 200 of 200 for every one of them, `idem race --http
/// --runs 200`), and never-violated invariants for the guards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_over_http_reproduces_the_course_figures() {
    let _serial = TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let rate = |results: &[idem::race::RaceResult],
                ok: &dyn Fn(&idem::race::RaceResult) -> bool| {
        results.iter().filter(|r| ok(r)).count() as f64 / results.len() as f64
    };

    // Lesson 1 as the course runs it, its test runner holding a
    // connection: 1 key row, 4 XP rows; every client was told 201.
    let course = over_http(StrategyKind::CheckThenStore)
        .with(|r| r.app.runner_holds_connection = Some(true));
    let r = races(&db, course.clone().built(), 100).await;
    assert!(
        r.iter()
            .all(|r| r.transport == Transport::Http && r.key_rows == 1)
    );
    assert!(
        rate(&r, &|r| r.xp_rows == 4) >= 0.95,
        "check-then-store gave 4 XP rows too rarely"
    );
    for result in &r {
        assert!(
            result.reports.iter().all(|w| w.status == 201),
            "every client sees 201"
        );
        assert_eq!(result.count(Outcome::Duplicate), result.xp_rows - 1);
    }
    // Every worker has a connection, five XP rows: with a pool of six, or
    // by default, as a Rails server on Puma holds no connection outside
    // its requests.
    let six = course.with(|r| r.app.pool_size = Some(6));
    for (what, input) in [
        ("a pool of six", six),
        (
            "a server's default",
            over_http(StrategyKind::CheckThenStore),
        ),
    ] {
        let r = races(&db, input.built(), 100).await;
        assert!(
            rate(&r, &|r| r.xp_rows == 5) >= 0.95,
            "{what} gave 5 XP rows too rarely"
        );
    }

    // Lesson 2: one XP row always; fail-fast losers get 409 on the wire.
    let r = races(&db, over_http(StrategyKind::ClaimWorkComplete).built(), 100).await;
    assert!(r.iter().all(|r| r.xp_rows == 1 && r.key_rows == 1));
    assert!(
        rate(&r, &|r| r.count(Outcome::Created) == 1
            && r.count(Outcome::Conflict) == 4)
            >= 0.95,
        "1×201 and 4×409 too rarely"
    );
    for result in &r {
        for w in result
            .reports
            .iter()
            .filter(|w| w.outcome == Outcome::Conflict)
        {
            assert_eq!(w.status, 409);
            assert_eq!(w.body.as_ref().unwrap()["code"], "idempotency_key_in_use");
        }
    }

    // The other shapes: the unique index and the guard always hold; no guard never does.
    for (strategy, xp) in [
        (StrategyKind::InsertUnique, 1),
        (StrategyKind::Guard, 1),
        (StrategyKind::None, 5),
    ] {
        let r = races(&db, over_http(strategy).built(), 30).await;
        assert!(
            r.iter().all(|r| r.xp_rows == xp),
            "{strategy}: {xp} XP rows in every run"
        );
    }
    db.close().await.unwrap();
}

/// `idem probe` against `idem serve`, one strategy at a time: the effects
/// are counted through SQL, and the verdict follows them.
#[test]
fn probe_counts_the_effects_of_every_strategy() {
    for (strategy, effects, held) in [
        ("guard", Some(1), true),
        ("claim-work-complete", Some(1), true),
        ("insert-unique", Some(1), true),
        ("none", Some(5), false),
        // Four of five requests find no key; measured 200 of 200 races above.
        ("check-then-store", None, false),
    ] {
        let app = Served::start("probe", &["-s", strategy]);
        let out = app.probe(&["--json", "-d", AWARD]);
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{strategy}: {}", String::from_utf8_lossy(&out.stderr)));
        let counted = report["effects"]["effects"].as_i64().unwrap();
        match effects {
            Some(n) => assert_eq!(counted, n, "{strategy}"),
            None => assert!(
                counted > 1,
                "{strategy}: duplicates expected, counted {counted}"
            ),
        }
        assert_eq!(report["verdict"]["held"], held, "{strategy}");
        assert_eq!(
            out.status.success(),
            held,
            "{strategy}: exit status follows the verdict"
        );
        assert_eq!(report["shots"].as_array().unwrap().len(), 5);
        if strategy == "guard" {
            assert_eq!(
                report["statuses"],
                serde_json::json!({ "201": 1, "409": 4 })
            );
        }
    }
}

/// The draft's cases: all PASS against the guard; check-then-store fails
/// the concurrent one (and only that one: it checks fingerprints, and replays).
#[test]
fn conformance_passes_the_guard_and_fails_check_then_store() {
    let marks = |strategy: &str| {
        let app = Served::start("conformance", &["-s", strategy]);
        let out = app.probe(&["--json", "--conformance", "-d", AWARD]);
        (out.status.success(), marks_of(&out.stdout))
    };
    let (ok, guard) = marks("guard");
    assert!(ok);
    assert_eq!(
        guard,
        expected_marks(&["pass", "pass", "pass", "pass", "not_applicable"])
    );

    let (ok, naive) = marks("check-then-store");
    assert!(!ok);
    assert_eq!(
        naive,
        expected_marks(&["pass", "pass", "fail", "pass", "not_applicable"])
    );
}

/// Under the conformance table, the profile: what the API answered of five
/// points beside the IETF draft and Stripe, from what the cases observed.
/// The guard answers as the draft asks on every point the draft makes (a
/// missing key 400, another body 422, in flight 409, the replay the
/// first's), and as Stripe on three of five (Stripe performs a request
/// without a key and answers another body 400). Its line is in the schema.
#[test]
fn the_profile_sets_the_guards_answers_beside_the_draft_and_stripe() {
    let schema: Value =
        serde_json::from_str(include_str!("../../schemas/probe.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let app = Served::start("profile", &["-s", "guard", "--work-ms", "300"]);
    let out = app.probe(&["--json", "--conformance", "-d", AWARD]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let profile: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("profile").is_some())
        .unwrap_or_else(|| panic!("no profile line in {stdout}"));
    let errors: Vec<String> = validator
        .iter_errors(&profile)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?} in {profile}");
    let point = |name: &str| {
        profile["profile"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["point"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {profile}"))
    };
    let agrees = |name: &str| {
        let p = point(name);
        (
            p["observed"].as_str().unwrap().to_string(),
            p["draft"].as_str().unwrap().to_string(),
            p["stripe"].as_str().unwrap().to_string(),
        )
    };
    let owned = |(a, b, c): (&str, &str, &str)| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(agrees("no key"), owned(("400", "matches", "differs")));
    assert_eq!(
        agrees("same key, other body"),
        owned(("422", "matches", "differs"))
    );
    assert_eq!(agrees("in flight"), owned(("409", "matches", "matches")));
    assert_eq!(
        agrees("replay"),
        owned(("the first's status and body", "matches", "matches"))
    );
    assert_eq!(
        agrees("replay marked"),
        owned(("Idempotent-Replayed: true", "silent", "matches"))
    );
    assert!(out.status.success(), "{stdout}");
}

/// The same key again while the first request works (300 ms of work, the
/// second sent at half the latency the probe timed first, about 150 ms in):
/// the guard answers 409 to the same body and 422 to another, with one
/// effect; check-then-store finds no key yet and does the work twice.
#[test]
fn a_request_in_flight_is_met_by_the_guard_and_done_twice_by_check_then_store() {
    let in_flight = |strategy: &str, extra: &[&str]| {
        let app = Served::start("in-flight", &["-s", strategy, "--work-ms", "300"]);
        let out = app.probe(&[&["--json", "--conformance", "-d", AWARD][..], extra].concat());
        let cases: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| {
                v["case"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("in flight"))
            })
            .collect();
        assert_eq!(cases.len(), 2, "{}", String::from_utf8_lossy(&out.stdout));
        (out.status.code(), cases)
    };
    let (code, guard) = in_flight("guard", &[]);
    assert_eq!(code, Some(0), "{guard:?}");
    let saw = |c: &Value| c["saw"].as_str().unwrap().to_owned();
    assert_eq!(guard[0]["mark"], "pass");
    assert!(
        saw(&guard[0]).contains("second 409; 1 effect"),
        "{}",
        saw(&guard[0])
    );
    assert!(
        saw(&guard[0]).contains("half the"),
        "says when it sent: {}",
        saw(&guard[0])
    );
    assert_eq!(guard[1]["mark"], "pass");
    assert!(
        saw(&guard[1]).contains("second 422; 1 effect"),
        "{}",
        saw(&guard[1])
    );

    // Sent after the first was answered, nothing was in flight: no verdict.
    let (code, late) = in_flight("guard", &["--in-flight-ms", "1000"]);
    assert_eq!(code, Some(0), "{late:?}");
    for case in &late {
        assert_eq!(case["mark"], "not_applicable", "{case}");
        assert!(saw(case).contains("nothing was in flight"), "{case}");
    }

    let (code, naive) = in_flight("check-then-store", &["--in-flight-ms", "100"]);
    assert_eq!(code, Some(1));
    for case in &naive {
        assert_eq!(case["mark"], "fail", "{case}");
        assert!(
            saw(case).contains("100 ms after the first send (--in-flight-ms)"),
            "{case}"
        );
        assert!(saw(case).contains("second 201; 2 effects"), "{case}");
    }
}

/// A client that gives up as soon as its request is sent, then retries:
/// `idem serve` drops the abandoned request at its next await (hyper's way).
/// The guard's claim is taken over after its stale-claim age, so the retries
/// end in a 201 and one effect; claim-work-complete's stays pending for
/// good, and every retry gets 409: the key is stuck, unless the app runs an
/// abandoned request to its end (`--on-hangup finish`, Puma's way).
#[test]
fn after_an_abort_the_guard_recovers_and_claim_work_complete_is_stuck() {
    let abort = |strategy: &str, serve: &[&str]| {
        let app = Served::start(
            "abort",
            &[&["-s", strategy, "--work-ms", "300"][..], serve].concat(),
        );
        let out = app.probe(&[
            "--json",
            "--conformance",
            "-d",
            AWARD,
            "--settle-ms",
            "2500",
        ]);
        let case: Value = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["case"] == names::AFTER_AN_ABORT)
            .expect("the abort case is reported");
        (out.status.code(), case)
    };
    let saw = |c: &Value| c["saw"].as_str().unwrap().to_owned();
    let (code, guard) = abort("guard", &[]);
    assert_eq!(code, Some(0), "{guard}");
    assert_eq!(guard["mark"], "pass");
    assert!(saw(&guard).ends_with("201; 1 effect"), "{}", saw(&guard));

    let (code, stuck) = abort("claim-work-complete", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(stuck["mark"], "fail");
    assert!(
        // A failure names its keys first, then what it saw.
        saw(&stuck).starts_with("keys ")
            && saw(&stuck).contains("-…: still 409 after 2.5 s: the key is stuck"),
        "{}",
        saw(&stuck)
    );
    assert!(saw(&stuck).ends_with("0 effects"), "{}", saw(&stuck));

    // Run to its end as Puma would, the abandoned request completes its
    // claim, and a retry (409 while it works) gets its response.
    let (code, finished) = abort("claim-work-complete", &["--on-hangup", "finish"]);
    assert_eq!(code, Some(0), "{finished}");
    assert_eq!(finished["mark"], "pass");
    assert!(
        saw(&finished).ends_with("201; 1 effect"),
        "{}",
        saw(&finished)
    );
}

/// `--retry-at`: the request, then the same again at each offset from its
/// send. Against 300 ms of work, check-then-store's retry at 150 ms finds no
/// key yet and does the work again (2 effects, exit 1); claim-work-complete
/// answers it 409, and replays the completed claim at 600 ms (1 effect).
/// Each schedule is a line of `--json` its schema takes.
#[test]
fn a_retry_schedule_finds_the_work_done_twice_and_the_claim_that_holds() {
    let schema: Value =
        serde_json::from_str(include_str!("../../schemas/probe.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let schedule = |strategy: &str| {
        let app = Served::start("retry-at", &["-s", strategy, "--work-ms", "300"]);
        let out = app.probe(&["--json", "-d", AWARD, "--retry-at", "150ms,600ms"]);
        let line: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        let errors: Vec<String> = validator
            .iter_errors(&line)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?} in {line}");
        (out.status.code(), line)
    };
    let (code, naive) = schedule("check-then-store");
    assert_eq!(code, Some(1), "{naive}");
    assert_eq!(naive["requests"], 1, "one first request unless -n is given");
    assert_eq!(naive["steps"][0]["status"], 201);
    assert_eq!(naive["steps"][0]["effects_so_far"], 2, "{naive}");
    assert_eq!(naive["effects"], 2);
    assert_eq!(naive["held"], false);

    let (code, claimed) = schedule("claim-work-complete");
    assert_eq!(code, Some(0), "{claimed}");
    assert_eq!(claimed["steps"][0]["status"], 409, "{claimed}");
    assert_eq!(claimed["steps"][1]["replayed"], true, "{claimed}");
    assert_eq!(claimed["steps"][1]["same_body"], true, "{claimed}");
    assert_eq!(claimed["effects"], 1);
    assert_eq!(claimed["held"], true);
}

/// A claim that goes stale while its owner still works: against 300 ms of
/// work and a 100 ms stale-claim rule, the guard's retry at 200 ms takes
/// the first request's claim over and calls the award service again. The
/// XP rows say 1 (the first request's rows rolled back when it found its
/// claim gone), the service's own record says 2: a duplicate, exit 1.
/// With the heartbeat renewing the running claim every 25 ms, the retry
/// is answered 409, then replayed, and the service was called once.
#[test]
fn a_claim_that_expires_mid_work_runs_the_work_twice_unless_its_owner_beats() {
    let schedule = |extra: &[&str], count: &str| {
        let mut args = vec!["-s", "guard", "--stale-after-ms", "100", "--work-ms", "300"];
        args.extend_from_slice(extra);
        let app = Served::start("stale-claim", &args);
        let probe = |a: &[&str]| match count {
            "calls" => app.probe_calls(a),
            _ => app.probe(a),
        };
        let out = probe(&["--json", "-d", AWARD, "--retry-at", "200ms,1s"]);
        let line: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (out.status.code(), line)
    };
    let (code, expired) = schedule(&[], "calls");
    assert_eq!(code, Some(1), "{expired}");
    assert_eq!(
        expired["steps"][0]["status"], 201,
        "took the claim over: {expired}"
    );
    assert_eq!(expired["steps"][0]["replayed"], false, "{expired}");
    assert_eq!(expired["effects"], 2, "{expired}");
    assert_eq!(expired["held"], false);

    // The same race counted by its XP rows hides the second call.
    let (code, rows) = schedule(&[], "xp");
    assert_eq!(code, Some(0), "{rows}");
    assert_eq!(rows["effects"], 1, "{rows}");

    let (code, beating) = schedule(&["--heartbeat-ms", "25"], "calls");
    assert_eq!(code, Some(0), "{beating}");
    assert_eq!(beating["steps"][0]["status"], 409, "{beating}");
    assert_eq!(beating["steps"][1]["replayed"], true, "{beating}");
    assert_eq!(beating["effects"], 1, "{beating}");
    assert_eq!(beating["held"], true);
}

/// A key that is everyone's answers a second caller with the first caller's
/// stored response (a leak, and no effect for the second caller's own
/// request); scoped by the caller's `Authorization`, the second caller's
/// request is its own: a fresh 201 and one effect of its own.
#[test]
fn a_key_not_scoped_by_its_caller_leaks_the_first_callers_response() {
    let caller_case = |scope: &str| {
        let app = Served::start("key-scope", &["-s", "guard", "--key-scope", scope]);
        let out = app.probe(&[
            "--json",
            "--conformance",
            "-d",
            AWARD,
            "-H",
            "Authorization: Bearer caller-a",
            "--other-caller",
            "Authorization: Bearer caller-b",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let case: Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["case"] == names::ANOTHER_CALLER)
            .unwrap_or_else(|| panic!("no caller case in {stdout}"));
        assert!(
            !stdout.contains("caller-b"),
            "a header's value is never shown"
        );
        (out.status.code(), case)
    };
    let (code, leaked) = caller_case("global");
    assert_eq!(code, Some(1), "{leaked}");
    assert_eq!(leaked["mark"], "fail");
    assert!(
        leaked["saw"]
            .as_str()
            .unwrap()
            .contains("(a leak); 0 effects"),
        "{leaked}"
    );

    let (code, scoped) = caller_case("caller");
    assert_eq!(code, Some(0), "{scoped}");
    assert_eq!(scoped["mark"], "pass");
    assert!(
        scoped["saw"]
            .as_str()
            .unwrap()
            .contains("a body of its own; 1 effect"),
        "{scoped}"
    );
}

/// The count query runs read-only: one that would delete is refused by the
/// server, and the rows are still there.
#[test]
fn a_count_query_cannot_change_anything() {
    let app = Served::start("count-readonly", &["-s", "guard"]);
    let schema = app.field("schema");
    let url = app.field("database_url");
    let run = |sql: &str| {
        app.sandbox
            .idem()
            .args(["probe", &app.endpoint(), "-d", AWARD, "--count-sql", sql])
            .args(["--count-database-url", &url])
            .output()
            .unwrap()
    };
    assert!(
        run(&format!("SELECT count(*) FROM {schema}.experience_points"))
            .status
            .success()
    );
    let out = run(&format!(
        "WITH gone AS (DELETE FROM {schema}.experience_points RETURNING 1) SELECT count(*) FROM gone"
    ));
    let err = errors(&out.stderr);
    assert!(!out.status.success());
    // Refused where the count is made: a data-modifying statement in its
    // STABLE function (and its READ ONLY transaction behind that).
    assert!(
        err.contains("is not allowed in a non-volatile function")
            || err.contains("read-only transaction"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = run(&format!("SELECT count(*) FROM {schema}.experience_points"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(1 before, 2 after,"),
        "the first probe's row survived: {text}"
    );
}

/// stderr without its notes (a superuser's count URL gets one): the errors.
fn errors(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Bad input: one line on stderr, a non-zero exit, nothing left running.
#[test]
fn bad_input_is_one_line_and_leaves_nothing() {
    let sandbox = common::Sandbox::new("probe-bad");
    // A port that speaks something else than HTTP.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let not_http = format!("http://{}/x", other.local_addr().unwrap());
    // A port nobody listens on (bound after the other, so it cannot be the same).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}/x", closed.local_addr().unwrap());
    drop(closed);
    std::thread::spawn(move || {
        use std::io::Write;
        for mut stream in other.incoming().flatten() {
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        }
    });
    let cases: [(&[&str], &str); 8] = [
        (&["probe", &nobody], "could not connect"),
        (&["probe", &not_http], "did not answer in HTTP"),
        (&["probe", "ftp://127.0.0.1/x"], "ftp:// is not HTTP"),
        (
            &["probe", "https://127.0.0.1:1/x", "--http2-prior-knowledge"],
            "--http2-prior-knowledge is for http:// URLs",
        ),
        (
            &["probe", "http://user:secret@127.0.0.1:1/x"],
            "credentials in the URL",
        ),
        (&["probe", &nobody, "--requests", "0"], "--requests"),
        (&["probe", &nobody, "--header", "nocolon"], "has no colon"),
        (
            &["probe", &nobody, "--count-sql", "SELECT 1"],
            "--count-database-url",
        ),
    ];
    for (args, says) in cases {
        let out = sandbox.idem().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("secret"), "{err}");
    }
    // A count query that errors: named, and the app is left as it was.
    let app = Served::start("probe-bad-count", &["-s", "guard"]);
    let out = app
        .sandbox
        .idem()
        .args([
            "probe",
            &app.endpoint(),
            "-d",
            AWARD,
            "--count-sql",
            "SELECT count(*) FROM no_such_table",
        ])
        .args(["--count-database-url", &app.field("database_url")])
        .output()
        .unwrap();
    let err = errors(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--count-sql failed") && err.contains("no_such_table"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(sandbox.leftovers().is_empty(), "{:?}", sandbox.leftovers());
}

/// Whether Ruby with the gems examples/ruby/app.rb needs is here (see
/// [`common::runnable`]).
fn ruby_runnable(test: &str) -> bool {
    let ruby = std::process::Command::new("ruby")
        .args(["-e", "require 'pg'; require 'webrick'"])
        .output()
        .is_ok_and(|o| o.status.success());
    common::runnable(
        test,
        ruby,
        "ruby with the pg and webrick gems (Debian: ruby ruby-pg ruby-webrick)",
    )
}

/// The challenge over HTTP at the Ruby app's `base`, counted in `database_url`.
fn challenge_the_ruby_app(
    sandbox: &common::Sandbox,
    base: &str,
    database_url: &str,
) -> std::process::Output {
    sandbox
        .idem()
        .args([
            "challenge",
            "--json",
            "--url",
            &format!("{base}/lessons/1/complete"),
        ])
        .args(["--count-sql", "SELECT count(*) FROM experience_points"])
        .args(["--count-database-url", database_url])
        .output()
        .unwrap()
}

/// The Ruby starting point of the challenge (examples/ruby/app.rb, lesson
/// 1's shape): judged over HTTP, it fails the cases the lessons fix and
/// passes the replay it already has.
#[test]
fn the_ruby_starter_fails_the_challenge() {
    if !ruby_runnable("the_ruby_starter_fails_the_challenge") {
        return;
    }
    let server = common::server::Server::start();
    let mut ruby = std::process::Command::new("ruby");
    ruby.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ruby/app.rb"));
    let (_app, base) = common::app::start_example(ruby, &server.url());
    let sandbox = common::Sandbox::new("ruby-challenge");
    let out = challenge_the_ruby_app(&sandbox, &base, &server.url());
    assert!(!out.status.success());
    assert_eq!(
        marks_of(&out.stdout),
        expected_marks(&["fail", "fail", "fail", "pass"])
    );
}

/// The abort case against two servers of the same naive app: the Ruby
/// example, whose WEBrick runs a request to its end after its client
/// left, and `idem serve -s check-then-store --on-hangup cancel`, which
/// drops it. The client hangs up 2 ms into a 20 ms award and retries at
/// once. WEBrick's request is still working when the retry finds no key:
/// the work is done twice (FAIL, 2 effects). The dropped request did
/// nothing, and the retry's is the one effect (PASS).
#[test]
fn the_abort_case_answers_as_the_server_treats_a_client_that_left() {
    if !ruby_runnable("the_abort_case_answers_as_the_server_treats_a_client_that_left") {
        return;
    }
    let abort_case = |out: &std::process::Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["case"] == names::AFTER_AN_ABORT)
            .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stdout)))
    };
    let hang_up_early = [
        "--json",
        "--conformance",
        "--in-flight-ms",
        "2",
        "-d",
        AWARD,
    ];

    let server = common::server::Server::start();
    let mut ruby = std::process::Command::new("ruby");
    ruby.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ruby/app.rb"));
    let (_app, base) = common::app::start_example(ruby, &server.url());
    let sandbox = common::Sandbox::new("ruby-abort");
    let out = sandbox
        .idem()
        .args(["probe", &format!("{base}/lessons/1/complete")])
        .args(["--count-sql", "SELECT count(*) FROM experience_points"])
        .args(["--count-database-url", &server.url()])
        .args(hang_up_early)
        .output()
        .unwrap();
    let finished = abort_case(&out);
    assert_eq!(finished["mark"], "fail", "{finished}");
    assert!(
        finished["saw"].as_str().unwrap().ends_with("2 effects"),
        "{finished}"
    );

    let app = Served::start(
        "abort-cancel",
        &[
            "-s",
            "check-then-store",
            "--work-ms",
            "20",
            "--on-hangup",
            "cancel",
        ],
    );
    let dropped = abort_case(&app.probe(&hang_up_early));
    assert_eq!(dropped["mark"], "pass", "{dropped}");
    assert!(
        dropped["saw"].as_str().unwrap().ends_with("1 effect"),
        "{dropped}"
    );
}

/// docs/over-the-wire.md's two lines for the Ruby challenge: `idem db -- ruby app.rb`
/// in one terminal (it prints the DATABASE_URL it made), `idem challenge
/// --url ... --count-database-url URL` in another. Then Ctrl-C's SIGINT
/// ends both, and the cluster is gone.
#[test]
fn idem_db_gives_the_ruby_challenge_a_database_and_takes_it_away() {
    use std::io::{BufRead, BufReader};
    if !ruby_runnable("idem_db_gives_the_ruby_challenge_a_database_and_takes_it_away") {
        return;
    }
    let sandbox = common::Sandbox::new("idem-db");
    let mut db = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
    db.env("TMPDIR", &sandbox.dir)
        .env("NO_COLOR", "1")
        .env("PORT", "0")
        .env_remove("DATABASE_URL")
        .args(["db", "--", "ruby"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ruby/app.rb"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut db = common::app::KillOnDrop(db.spawn().unwrap());
    let mut stderr = BufReader::new(db.0.stderr.take().unwrap()).lines();
    let said = stderr.next().unwrap().unwrap();
    std::thread::spawn(move || stderr.for_each(drop));
    let url = said
        .strip_prefix("idem db: DATABASE_URL=")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("idem db says the URL first: {said:?}"))
        .to_string();
    let base = common::first_line_then_drain(&mut db.0)
        .strip_prefix("listening on ")
        .expect("the app says where it listens")
        .to_string();
    let out = challenge_the_ruby_app(&sandbox, &base, &url);
    assert_eq!(
        marks_of(&out.stdout),
        expected_marks(&["fail", "fail", "fail", "pass"]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ctrl-C reaches the whole process group: both idem db and ruby.
    let pid = db.0.id() as i32;
    // SAFETY: signals the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let status = common::wait_for(&mut db.0, std::time::Duration::from_secs(10));
    assert!(status.is_some(), "idem db ends after SIGINT");
    assert!(sandbox.leftovers().is_empty(), "{:?}", sandbox.leftovers());
}
