//! Guard files written for MariaDB, on a real `mariadbd` idem starts: raced and walked as their shape, run as a user of the run's own that may touch the run's tables and nothing else, each statement stopped by the server past its limit.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Sandbox, TIMING, refused_in_one_line};

const CHECK: &str = "examples/mariadb/check-then-store.toml";
const CLAIM: &str = "examples/mariadb/claim-work-complete.toml";

/// `idem race --engine mariadb --json ARGS`: every run's result.
fn runs(sandbox: &Sandbox, args: &[&str]) -> Vec<Value> {
    let out = sandbox
        .idem()
        .args(["race", "--engine", "mariadb", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `file`'s find replaced by `find`, written into the sandbox.
fn with_find(sandbox: &Sandbox, name: &str, find: &str) -> String {
    let text = std::fs::read_to_string(CHECK).unwrap();
    let start = text.find("find = '''").unwrap();
    let end = start + text[start..].find("'''\n\nstore").unwrap() + 3;
    let text = format!("{}find = '''\n{find}\n'''{}", &text[..start], &text[end..]);
    let path = sandbox.dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_guard_file_for_mariadb_races_and_is_walked_as_its_shape() {
    let sandbox = Sandbox::new("engines-guard-files");
    let _serial = TIMING.blocking_lock();
    // Lesson 1's figure from the file, as from the built-in: 4 XP rows at
    // a pool of five, the losers' stores meeting 1062.
    for r in runs(&sandbox, &["--strategy-file", CHECK, "--runs", "3"]) {
        assert_eq!(r["xp_rows"], 4, "{r}");
        assert_eq!(r["strategy_file"], CHECK, "{r}");
        assert!(r["errors"]["1062 (23000, ER_DUP_ENTRY)"].is_u64(), "{r}");
    }
    for r in runs(&sandbox, &["--strategy-file", CLAIM, "--runs", "3"]) {
        assert_eq!(
            (r["xp_rows"].as_u64(), r["key_rows"].as_u64()),
            (Some(1), Some(1)),
            "{r}"
        );
    }
    // Every interleaving of two requests, as the built-in shapes' walk.
    let walked = |file: &str| -> Value {
        let out = sandbox
            .idem()
            .args([
                "explore",
                "--engine",
                "mariadb",
                "--json",
                "--strategy-file",
                file,
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let claim = walked(CLAIM);
    assert_eq!(
        (claim["held"].as_u64(), claim["interleavings"].as_u64()),
        (Some(44), Some(44)),
        "{claim}"
    );
    let check = walked(CHECK);
    assert_eq!(
        (check["failing"].as_u64(), check["interleavings"].as_u64()),
        (Some(60), Some(70)),
        "{check}"
    );
}

#[test]
fn a_guard_file_on_mariadb_may_touch_the_run_s_tables_and_nothing_else() {
    let sandbox = Sandbox::new("engines-guard-rights");
    let _serial = TIMING.blocking_lock();
    // Another database: the server refuses the statement before the race,
    // and idem says where it stands in the file.
    let peek = with_find(
        &sandbox,
        "peek.toml",
        "SELECT COUNT(*) AS response_body FROM mysql.user",
    );
    let err = refused_in_one_line(sandbox.idem().args([
        "race",
        "--engine",
        "mariadb",
        "--strategy-file",
        &peek,
    ]));
    assert!(
        err.contains("SELECT command denied") && err.contains("peek.toml line"),
        "{err}"
    );
    // A server file and other users' sessions: as root this find would
    // see either and return a row, and no request would work; as the
    // run's guard user it sees neither, and every one of the five works
    // (it never looks at the key, so none finds it).
    let sees = with_find(
        &sandbox,
        "sees.toml",
        "SELECT 1 AS response_body FROM DUAL WHERE LOAD_FILE('/etc/hostname') IS NOT NULL \
         OR EXISTS (SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = 'root')",
    );
    let r = &runs(&sandbox, &["--strategy-file", &sees])[0];
    assert_eq!(
        (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
        (Some(5), Some(5)),
        "{r}"
    );
    // A statement that would run for 30 s is stopped by the server at the
    // step limit (5 s, the work behind every request, the stale-claim age).
    let slow = with_find(&sandbox, "slow.toml", "SELECT SLEEP(30) AS response_body");
    let began = Instant::now();
    let r = &runs(&sandbox, &["--strategy-file", &slow, "-w", "2"])[0];
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(r["errors"]["1969 (70100, ER_STATEMENT_TIMEOUT)"], 2, "{r}");
    // A file is raced on the engine it is written for, and a step MariaDB
    // has no run for yet is refused where it stands.
    let err = refused_in_one_line(sandbox.idem().args(["race", "--strategy-file", CLAIM]));
    assert!(err.contains("written for MariaDB"), "{err}");
    let err = refused_in_one_line(sandbox.idem().args([
        "race",
        "--engine",
        "mariadb",
        "--strategy-file",
        "exercises/2-claim-first.toml",
    ]));
    assert!(err.contains("written for PostgreSQL"), "{err}");
    let fingerprint = sandbox.dir.join("fingerprint.toml");
    let text = std::fs::read_to_string(CLAIM).unwrap()
        + "\nfingerprint = \"SELECT SHA2(CONCAT($user_id, ':', $amount), 256)\"\n";
    std::fs::write(&fingerprint, text).unwrap();
    let err = refused_in_one_line(
        sandbox
            .idem()
            .args(["race", "--engine", "mariadb", "--strategy-file"])
            .arg(&fingerprint),
    );
    assert!(
        err.contains("step fingerprint is not run on MariaDB yet"),
        "{err}"
    );
}

/// A guard file's release step on MariaDB: failed work (`--fail-work`)
/// lets the claim go, so the client's retry claims the key again, works
/// and succeeds (1 XP row, 2 calls); without the step the claim stays
/// pending and the retry is told 409 (0 XP rows, 1 call).
#[test]
fn a_guard_files_release_step_lets_failed_works_claim_go_on_mariadb() {
    let sandbox = Sandbox::new("engines-guard-release");
    let text = std::fs::read_to_string(CLAIM).unwrap();
    let release = "release = '''\nDELETE FROM idempotency_keys\n\
                   WHERE id = $claim_id AND worker = $worker AND status = 'pending'\n'''\n\n";
    let with_release = text.replacen("replay = '''", &format!("{release}replay = '''"), 1);
    assert_ne!(with_release, text, "the example's replay step moved");
    let path = sandbox.dir.join("released.toml");
    std::fs::write(&path, with_release).unwrap();
    let failed = ["--workers", "1", "--fail-work", "1", "--runs", "2"];
    for (file, xp, calls, retried) in [
        (path.display().to_string(), 1, 2, "created"),
        (CLAIM.to_string(), 0, 1, "conflict"),
    ] {
        for r in runs(
            &sandbox,
            &[&["--strategy-file", file.as_str()][..], &failed].concat(),
        ) {
            assert_eq!(
                (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
                (Some(xp), Some(calls)),
                "{file}: {r}"
            );
            assert_eq!(r["outcomes"]["failed"], 1, "{file}: {r}");
            assert_eq!(r["outcomes"][retried], 1, "{file}: {r}");
        }
    }
}
