//! `--engine` on `lesson` and `scenario`: only the demonstrations on the engines asked for run, a scenario named on another engine is refused (its expected figures are its own engine's), and a lesson whose MariaDB cannot start says how to leave MariaDB out.

use crate::common::{Sandbox, refused_in_one_line, refused_in_one_line_with};

/// The scenario files a lesson's output shows, as it names them.
fn shown(stdout: &str) -> Vec<String> {
    stdout
        .split_whitespace()
        .filter(|w| w.starts_with("scenarios/") && w.ends_with(".toml"))
        .map(str::to_string)
        .collect()
}

/// Whether the built-in scenario `file` is written for MariaDB, read from
/// the file itself, not from its name.
fn on_mariadb(file: &str) -> bool {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().any(|l| l.trim() == "engine = \"mariadb\"")
}

#[test]
fn a_lesson_runs_only_the_demonstrations_on_the_engines_asked_for() {
    let sandbox = Sandbox::new("engines-chosen");
    // No MariaDB to be had: --engine postgres must not need one.
    let postgres = sandbox
        .idem()
        .args(["lesson", "2", "--engine", "postgres", "--no-pause"])
        .env("IDEM_MARIADB_BIN", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&postgres.stderr);
    assert!(postgres.status.success(), "{stderr}");
    let files = shown(&String::from_utf8_lossy(&postgres.stdout));
    assert!(!files.is_empty());
    assert!(files.iter().all(|f| !on_mariadb(f)), "{files:?}");

    let mariadb = sandbox
        .idem()
        .args(["lesson", "2", "--engine", "mariadb", "--no-pause"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&mariadb.stderr);
    assert!(mariadb.status.success(), "{stderr}");
    let files = shown(&String::from_utf8_lossy(&mariadb.stdout));
    assert!(!files.is_empty());
    assert!(files.iter().all(|f| on_mariadb(f)), "{files:?}");
}

#[test]
fn a_lesson_whose_mariadb_cannot_start_says_how_to_leave_it_out() {
    let sandbox = Sandbox::new("engines-chosen");
    let err = refused_in_one_line(
        sandbox
            .idem()
            .args(["lesson", "1", "--no-pause"])
            .env("IDEM_MARIADB_BIN", "/nonexistent"),
    );
    assert!(err.contains("--engine postgres"), "{err}");
    // Asked for by name, MariaDB's absence is the error itself.
    let err = refused_in_one_line(
        sandbox
            .idem()
            .args(["scenario", "run", "--engine", "mariadb"])
            .arg("1-check-then-store-on-innodb")
            .env("IDEM_MARIADB_BIN", "/nonexistent"),
    );
    assert!(!err.contains("--engine postgres"), "{err}");
}

#[test]
fn a_scenario_or_lesson_on_another_engine_is_refused_in_one_line() {
    let sandbox = Sandbox::new("engines-chosen");
    let err = refused_in_one_line_with(
        sandbox.idem().args([
            "scenario",
            "run",
            "1-check-then-store",
            "--engine",
            "mariadb",
        ]),
        2,
    );
    assert!(err.contains("written for PostgreSQL"), "{err}");
    assert!(err.contains("1-check-then-store-on-innodb"), "{err}");
    let err = refused_in_one_line_with(
        sandbox.idem().args(["lesson", "3", "--engine", "mariadb"]),
        2,
    );
    assert!(err.contains("no demonstration on MariaDB"), "{err}");
}

#[test]
fn scenario_list_names_each_engines_own_scenarios() {
    let sandbox = Sandbox::new("engines-chosen");
    let listed = |engine: &str| {
        let out = sandbox
            .idem()
            .args(["scenario", "list", "--engine", engine])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(|name| format!("scenarios/{name}.toml"))
            .collect::<Vec<_>>()
    };
    let (postgres, mariadb) = (listed("postgres"), listed("mariadb"));
    assert!(!mariadb.is_empty() && !postgres.is_empty());
    assert!(mariadb.iter().all(|f| on_mariadb(f)), "{mariadb:?}");
    assert!(postgres.iter().all(|f| !on_mariadb(f)), "{postgres:?}");
    let every = std::fs::read_dir("scenarios").unwrap().count();
    assert_eq!(postgres.len() + mariadb.len(), every);
}

/// Exercise 2 has a file for MariaDB: written with `--engine mariadb`, its
/// race shown with `--engine mariadb`, judged there by `idem check` (it
/// fails as given); an exercise with no cases on MariaDB refuses such a
/// file, and one with no file for MariaDB is not written for it.
#[test]
fn exercise_two_is_written_for_mariadb_and_judged_there() {
    let sandbox = Sandbox::new("engines-exercise");
    let out = sandbox
        .idem()
        .current_dir(&sandbox.dir)
        .args(["exercise", "2", "--engine", "mariadb"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("idem race --engine mariadb"), "{said}");
    let file = sandbox.dir.join("2-claim-first.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("engine = \"mariadb\""));

    let checked = sandbox
        .idem()
        .current_dir(&sandbox.dir)
        .args(["check", "2", "2-claim-first.toml", "--json"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(1));
    let cases: Vec<serde_json::Value> = String::from_utf8_lossy(&checked.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v.get("case").is_some())
        .collect();
    assert_eq!(cases.len(), 3, "{cases:?}");
    assert!(cases.iter().all(|c| c["mark"] == "fail"), "{cases:?}");
    // The exploration is no race: its count is the same every time.
    let walked = cases[2]["saw"].as_str().unwrap();
    assert!(walked.starts_with("failed in 60 of 70"), "{walked}");

    let err = refused_in_one_line(sandbox.idem().current_dir(&sandbox.dir).args([
        "check",
        "4",
        "2-claim-first.toml",
    ]));
    assert!(err.contains("written for MariaDB"), "{err}");
    assert!(err.contains("exercise 4 has none there"), "{err}");
    let err = refused_in_one_line_with(
        sandbox
            .idem()
            .args(["exercise", "3", "--engine", "mariadb"]),
        1,
    );
    assert!(err.contains("no file for MariaDB"), "{err}");
}
