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
