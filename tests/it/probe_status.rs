//! The probe's exit-code contract, each status reached on purpose here or beside the case that reaches it: 0 held (http.rs), 1 failed (http.rs), 2 a wrong command line, 3 not judged (no_race.rs, helper_connections.rs), 4 could not run.

use crate::common::Sandbox;

fn probe(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let out = sandbox.idem().arg("probe").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn each_way_a_probe_can_end_has_its_own_status() {
    let sandbox = Sandbox::new("probe-status");
    let nobody = "http://127.0.0.1:1/lessons/1/complete";
    // 2: the command line is wrong.
    let (code, err) = probe(&sandbox, &[nobody, "--count-sql", "SELECT 1"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // 4: nothing answers at all.
    let (code, err) = probe(&sandbox, &[nobody, "-d", "{}", "--timeout-ms", "5000"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no request got an answer"), "{err}");
    // 4: the count cannot be taken before the first request.
    let (code, err) = probe(
        &sandbox,
        &[
            nobody,
            "--count-sql",
            "SELECT 1",
            "--count-database-url",
            "postgres://nobody@127.0.0.1:1/none",
        ],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The contract is in --help.
    let help = sandbox.idem().args(["probe", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit status: 0 every case held; 1 a case failed"),
        "{help}"
    );
}

/// `--count-cmd`: effects counted by any command, here psql on the app's
/// database. Check-then-store's duplicates are found as with --count-sql,
/// and a command that fails, hangs or talks too much is refused before the
/// first request (status 4), its stderr escaped, a hung one killed.
#[test]
fn a_count_command_counts_effects_anywhere_and_is_bounded() {
    let app = crate::common::app::Served::start("count-cmd", &["-s", "check-then-store"]);
    let psql = format!(
        "psql '{}' -Atc '{}'",
        app.field("database_url"),
        app.field("count_sql")
    );
    let award = r#"{"user_id": 42, "amount": 10}"#;
    let out = app
        .sandbox
        .idem()
        .args(["probe", &app.endpoint(), "-d", award, "--count-cmd", &psql])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("duplicate"), "{stdout}");
    let marker = format!("sleep 3{}", std::process::id() % 1000);
    for (cmd, said) in [
        (
            "echo 'boom \x1b[31m' >&2; exit 3",
            "failed (exit status: 3): boom \\x1b[31m",
        ),
        (marker.as_str(), "did not finish within 300 ms"),
        ("yes 1 | head -c 10000", "wrote more than 4096 bytes"),
        ("echo lots", "printed \"lots\", not one whole number"),
    ] {
        let began = std::time::Instant::now();
        let out = app
            .sandbox
            .idem()
            .args(["probe", &app.endpoint(), "-d", award, "--count-cmd", cmd])
            .args(["--count-timeout-ms", "300"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{cmd}: {err}");
        assert!(err.contains(said), "{cmd}: {err}");
        assert!(!err.contains('\x1b'), "escaped: {err}");
        assert!(began.elapsed() < std::time::Duration::from_secs(10));
    }
    // The whole probe's bound drops the count mid-run: its command goes too.
    let dropped = format!("sleep 4{}", std::process::id() % 1000);
    let out = app
        .sandbox
        .idem()
        .args([
            "probe",
            &app.endpoint(),
            "-d",
            award,
            "--count-cmd",
            &dropped,
        ])
        .args(["--timeout-ms", "800", "--count-timeout-ms", "60000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let left = crate::common::processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(&marker) || p.cmdline.contains(&dropped))
        .count();
    assert_eq!(left, 0, "the hung commands were killed");
}

/// `--wait-for-ms` waits for a service that is still starting, says how
/// long it took, and ends with 4 when it never came up.
#[test]
fn wait_for_ms_waits_for_a_late_service_and_gives_up_on_an_absent_one() {
    let sandbox = Sandbox::new("probe-wait");
    let nobody = "http://127.0.0.1:1/pay";
    let (code, err) = probe(&sandbox, &[nobody, "-d", "{}", "--wait-for-ms", "300"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("did not answer within --wait-for-ms 300"),
        "{err}"
    );
    let port = crate::common::free_port();
    let dir = sandbox.dir.clone();
    let late = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        crate::common::flawed::start_at(
            crate::common::flawed::Flaw::None,
            &dir,
            &format!("127.0.0.1:{port}"),
        )
    });
    let url = format!("http://127.0.0.1:{port}/pay");
    let (code, err) = probe(&sandbox, &[&url, "-d", "{}", "--wait-for-ms", "10000"]);
    late.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    let waited: u64 = err
        .split("answered after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("how long it waited: {err}"));
    assert!(waited >= 300, "it waited for the late service: {err}");
}
