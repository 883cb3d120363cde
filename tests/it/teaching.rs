//! Teaching: scenario files with expected figures, narrated lessons, and step-by-step interleavings.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idem::db::{ConnectOptions, Database};
use idem::scenario::{self, builtin};
use predicates::prelude::*;

use crate::common::Sandbox;

/// The scenario files are the living proof: every one shows its figures.
/// They run by the lessons they teach, each group on its own
/// cluster: three tests side by side rather than one a minute long.
const SCENARIO_GROUPS: [std::ops::RangeInclusive<u8>; 3] = [1..=3, 4..=8, 9..=11];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_files_of_lessons_1_to_3_show_their_expected_figures() {
    scenario_files_show_their_figures(&SCENARIO_GROUPS[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_files_of_lessons_4_to_8_show_their_expected_figures() {
    scenario_files_show_their_figures(&SCENARIO_GROUPS[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_files_of_lessons_9_to_11_show_their_expected_figures() {
    scenario_files_show_their_figures(&SCENARIO_GROUPS[2]).await;
}

#[test]
fn every_scenario_file_is_in_one_group() {
    let lessons: Vec<u8> = builtin::all().unwrap().iter().map(|s| s.lesson).collect();
    for lesson in lessons {
        let groups = SCENARIO_GROUPS
            .iter()
            .filter(|g| g.contains(&lesson))
            .count();
        assert_eq!(groups, 1, "lesson {lesson}'s scenarios run in one group");
    }
}

/// Runs every file in scenarios/ whose lesson is in `lessons`, each with
/// its runs and its expected figures.
async fn scenario_files_show_their_figures(lessons: &std::ops::RangeInclusive<u8>) {
    // The scenarios with app replicas start idem itself, not this test binary.
    idem::race::replicas::use_program(env!("CARGO_BIN_EXE_idem").into());
    let mut files: Vec<_> = std::fs::read_dir("scenarios")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 20, "a scenario per demonstration");
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let mut failed = Vec::new();
    let mut ran = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let s = scenario::parse(file, &text).unwrap();
        if !lessons.contains(&s.lesson) {
            continue;
        }
        ran += 1;
        let verdict = scenario::run(&db, &s).await.unwrap();
        if let Some(why) = &verdict.skipped {
            let name = format!(
                "the scenario files show their expected figures ({})",
                s.title
            );
            crate::common::runnable(&name, false, why);
        }
        if !verdict.passed() {
            failed.push(idem::report::scenario::render_verdict(&verdict));
        }
        // Each race's sentence names only what the race shows.
        for r in &verdict.results {
            let told = idem::report::explain::told(r);
            let wrong = told.disagreements(r);
            if !wrong.is_empty() {
                failed.push(format!(
                    "{}: the sentence disagrees: {wrong:?} {told:?}",
                    s.title
                ));
            }
        }
    }
    db.close().await.unwrap();
    assert!(ran > 0, "no scenario file of lessons {lessons:?}");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_built_in_scenarios_are_the_files_in_the_folder() {
    let mut files: Vec<String> = std::fs::read_dir("scenarios")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    files.sort();
    let built_in: Vec<String> = builtin::SCENARIOS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    assert_eq!(files, built_in);
    for (name, text) in builtin::SCENARIOS {
        assert_eq!(
            std::fs::read_to_string(format!("scenarios/{name}")).unwrap(),
            *text
        );
    }
    let lessons: std::collections::BTreeSet<u8> =
        builtin::all().unwrap().iter().map(|s| s.lesson).collect();
    assert_eq!(lessons.len(), 11, "every lesson has scenarios");
}

#[test]
fn a_malformed_scenario_names_the_file_line_and_column() {
    let sandbox = Sandbox::new("bad-scenario");
    let cases = [
        (
            "unknown-key.toml",
            "title = \"t\"\nlesson = 1\nexplain = \"e\"\n[race]\nstrategy = \"none\"\nworkrs = 5\n[expect]\n",
            "unknown-key.toml:6:1",
            "unknown field `workrs`",
        ),
        (
            "bad-toml.toml",
            "title = \"t\"\nlesson = = 1\n",
            "bad-toml.toml:2:",
            "",
        ),
        (
            "bad-strategy.toml",
            "title = \"t\"\nlesson = 1\nexplain = \"e\"\n[race]\nstrategy = \"hope\"\n[expect]\n",
            "bad-strategy.toml:5:",
            "unknown variant `hope`",
        ),
        (
            "no-race.toml",
            "title = \"t\"\nlesson = 1\nexplain = \"e\"\n[expect]\n",
            "no-race.toml",
            "needs a [race], a [keys], a [pooler] or an [explore] section",
        ),
        (
            "two-kinds.toml",
            "title = \"t\"\nlesson = 1\nexplain = \"e\"\n[race]\n[pooler]\nfinding = \"setting\"\n[expect]\nbroken_runs = 1\n",
            "two-kinds.toml",
            "one of [race], [keys], [pooler] and [explore], not more",
        ),
        (
            "bad-finding.toml",
            "title = \"t\"\nlesson = 3\nexplain = \"e\"\n[pooler]\nfinding = \"hope\"\n[expect]\nbroken_runs = 1\n",
            "bad-finding.toml:5:",
            "none of idem pooler's findings; use setting, advisory_lock, prepared_statement",
        ),
        (
            "pooler-rows.toml",
            "title = \"t\"\nlesson = 3\nexplain = \"e\"\n[pooler]\nfinding = \"setting\"\n[expect]\nxp_rows = 1\n",
            "pooler-rows.toml",
            "expect.xp_rows does not apply to a [pooler] scenario",
        ),
    ];
    for (name, text, place, what) in cases {
        let path = sandbox.dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = sandbox
            .idem()
            .args(["scenario", "run"])
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(place))
            .stderr(predicate::str::contains(what));
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        std::fs::remove_file(path).unwrap();
    }
    assert_eq!(
        sandbox.leftovers(),
        Vec::<String>::new(),
        "nothing started for a bad file"
    );
}

#[test]
fn scenario_run_exits_non_zero_with_a_diff_when_a_figure_differs() {
    let sandbox = Sandbox::new("wrong-expectation");
    let path = sandbox.dir.join("wrong.toml");
    std::fs::write(
        &path,
        "title = \"claims cannot duplicate\"\nlesson = 2\nexplain = \"e\"\n[race]\nstrategy = \"claim-work-complete\"\n[expect]\nxp_rows = 4\n",
    )
    .unwrap();
    sandbox
        .idem()
        .args(["scenario", "run"])
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("--- expected"))
        .stdout(predicate::str::contains("-XP rows: 4"))
        .stdout(predicate::str::contains("+XP rows: 1"));
    std::fs::remove_file(path).unwrap();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn lessons_are_listed_and_a_lesson_runs_straight_through_without_a_terminal() {
    let sandbox = Sandbox::new("lessons");
    // Wide enough that no lesson's line wraps: one table row each.
    let out = sandbox
        .idem()
        .arg("lessons")
        .env("COLUMNS", "240")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with('│')).count(),
        12,
        "a header and eleven lessons"
    );
    sandbox
        .idem()
        .args(["lesson", "6"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Lesson 6: Designing the key itself",
        ))
        .stdout(predicate::str::contains("Random keys"))
        .stdout(predicate::str::contains("Explore on your own:\n  idem "))
        .stdout(predicate::str::contains(
            "End of lesson 6.\nTry it yourself: lesson 6's exercise, checked by idem\n  idem exercise 6\n\
             Next: lesson 7, Putting idempotency keys together\n  idem lesson 7\n",
        ))
        .stdout(predicate::str::contains("FAILED").not());
    // The lesson told to its end is kept as read, in the sandbox's state
    // directory, and the list says where to go on.
    let kept = sandbox.state().join("idem").join("progress.toml");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap().trim(),
        "lessons_read = [6]"
    );
    sandbox
        .idem()
        .arg("lessons")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "1 of 11 read. Go on: idem lesson 1",
        ));
    sandbox
        .idem()
        .arg("progress")
        .assert()
        .success()
        .stdout(predicate::str::contains("lessons read: 1 of 11 (6)"));
    sandbox
        .idem()
        .args(["progress", "--reset"])
        .assert()
        .success();
    assert!(!kept.exists());
    // A file that is not idem's is refused in one line and left as it is.
    std::fs::write(&kept, "junk\n").unwrap();
    let refused = sandbox
        .idem()
        .args(["progress", "--reset"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).to_string();
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not idem's progress"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "junk\n");
    std::fs::remove_file(&kept).unwrap();
    // The tour from the last lesson tells that one only, and points nowhere after it.
    sandbox
        .idem()
        .args(["tour", "--from", "11", "--no-pause"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Lesson 11: More than one primary"))
        .stdout(predicate::str::contains("Lesson 10:").not())
        .stdout(predicate::str::contains("End of lesson 11.\n"))
        .stdout(predicate::str::contains("Next:").not());
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// Each lesson shows what its screens point at, in the order they point at
/// it, and ends with a command to run next.
#[test]
fn lessons_show_what_they_narrate_in_order() {
    let sandbox = Sandbox::new("lessons-show");
    let told = |n: &str| -> String {
        let out = sandbox
            .idem()
            .args(["lesson", n, "--no-pause"])
            .env("COLUMNS", "120")
            .output()
            .unwrap();
        assert!(out.status.success(), "lesson {n}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let in_order = |text: &str, marks: &[&str]| {
        let mut from = 0;
        for mark in marks {
            let at = text[from..]
                .find(mark)
                .unwrap_or_else(|| panic!("{mark:?} missing, or out of order, in:\n{text}"));
            from += at + mark.len();
        }
    };
    // Lesson 1: one race (why, table, timeline), then the pool of six, then the distribution.
    in_order(
        &told("1"),
        &[
            "found no key before any was stored",
            "│ worker │ checkout wait │",
            "timeline, ms from the start gate",
            "A pool of six",
            "XP rows per run",
            "Explore on your own:\n  idem ",
        ],
    );
    // Lesson 2: the two schedules side by side, the finds-before-stores one first.
    in_order(
        &told("2"),
        &[
            "both find before either stores",
            "│ step │ check-then-store",
            "claim-work-complete",
            "2 XP rows",
            "1 XP row",
            "timeline in step order",
            "XP rows per run",
            "Explore on your own:\n  idem ",
        ],
    );
    // Lesson 3: the policies, with poll's reads and block's connection-seconds.
    in_order(
        &told("3"),
        &[
            "fails fast",
            "polls",
            "blocks",
            "queries/race",
            "conn-s waiting",
            "Explore on your own:\n  idem ",
        ],
    );
    // Lesson 5: what an audit finds, in each store.
    in_order(
        &told("5"),
        &[
            "audit of key",
            "cache:",
            "audit of key",
            "key table:",
            "Explore on your own:\n  idem ",
        ],
    );
}

fn step(sandbox: &Sandbox, args: &[&str]) -> (bool, String, String) {
    let out = sandbox
        .idem()
        .arg("step")
        .args(args)
        .args(["--work-ms", "0", "--workers", "2"])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn xp_rows(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with("XP rows"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn schedules_reproduce_the_interleavings_exactly() {
    let sandbox = Sandbox::new("schedules");
    let interleaved = "1,2,1,2,1,2,1,2";
    let serial = "1,1,1,1,2,2,2,2";
    let (ok, out, _) = step(&sandbox, &["--schedule", interleaved]);
    assert!(
        ok && xp_rows(&out).contains(" 2 "),
        "both find before either stores: {}",
        xp_rows(&out)
    );
    let (ok, out, _) = step(&sandbox, &["--schedule", serial]);
    assert!(
        ok && xp_rows(&out).contains(" 1 "),
        "worker 1 stores first: {}",
        xp_rows(&out)
    );
    for schedule in [interleaved, serial] {
        let (ok, out, _) = step(
            &sandbox,
            &["-s", "claim-work-complete", "--schedule", schedule],
        );
        assert!(
            ok && xp_rows(&out).contains(" 1 "),
            "claim-work-complete: {}",
            xp_rows(&out)
        );
    }
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn a_schedule_that_cannot_proceed_says_so_instead_of_hanging() {
    let sandbox = Sandbox::new("blocked-schedule");
    let (ok, out, err) = step(
        &sandbox,
        &[
            "-s",
            "claim-work-complete",
            "--loser",
            "block",
            "--schedule",
            "1,1,2,2,2",
        ],
    );
    assert!(!ok);
    assert!(out.contains("<waiting for worker 1>"), "{out}");
    assert!(
        err.contains("cannot proceed at step 5") && err.contains("blocked"),
        "{err}"
    );
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// A shell `command` run in a real pseudo-terminal (util-linux `script`),
/// in the sandbox, without colour or a database URL; `{idem}` in it names
/// the idem binary.
pub(crate) fn in_a_terminal(sandbox: &Sandbox, command: &str) -> Command {
    let idem = assert_cmd::cargo::cargo_bin("idem");
    let command = command.replace("{idem}", &idem.display().to_string());
    let mut script = Command::new("script");
    script
        .args(["-qfec", &command, "/dev/null"])
        .env("TMPDIR", &sandbox.dir)
        .env("XDG_STATE_HOME", sandbox.state())
        .env("NO_COLOR", "1")
        .env_remove("DATABASE_URL");
    script
}

/// `idem step` in a real pseudo-terminal, fed `keys`.
fn at_a_terminal(sandbox: &Sandbox, keys: &[u8]) -> (bool, String) {
    let mut child = in_a_terminal(sandbox, "{idem} step --workers 2 --work-ms 0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    child.stdin.as_mut().unwrap().write_all(keys).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

/// One key moves a worker, without Enter; `q` and Ctrl-D stop cleanly
/// (exit 0) with a summary of the steps so far, and the rest run to the end.
#[test]
fn a_key_moves_a_worker_and_q_or_ctrl_d_stops_cleanly() {
    for (keys, why) in [
        (&b"1q"[..], "stopped (q) after 1 steps"),
        (&b"12\x04"[..], "stopped (end of input) after 2 steps"),
    ] {
        let sandbox = Sandbox::new("step-keys");
        let (ok, stdout) = at_a_terminal(&sandbox, keys);
        assert!(ok, "{stdout}");
        assert!(stdout.contains(why), "{stdout}");
        assert!(stdout.contains("1. worker 1: got a connection"), "{stdout}");
        assert!(
            stdout.contains("idem race · check-then-store"),
            "the race as it ended: {stdout}"
        );
        assert_eq!(sandbox.leftovers(), Vec::<String>::new());
    }
}

/// The interactive mode, through a real pseudo-terminal (util-linux `script`).
#[test]
fn the_interactive_mode_takes_turns_from_a_terminal() {
    let sandbox = Sandbox::new("interactive");
    // Both find before either stores, typed one turn at a time (Enter is
    // not needed, and is ignored); "z" is refused politely, and "c"
    // moves the clock, which finds no claim to age in check-then-store.
    let (ok, stdout) = at_a_terminal(&sandbox, b"z\nc\n1\n2\n1\n2\n1\n2\n1\n2\n");
    assert!(ok, "{stdout}");
    assert!(
        stdout.contains("press 1-2 to move that worker, c the clock, x and a number to crash"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the clock jumps: no pending claim to age"),
        "{stdout}"
    );
    assert!(stdout.contains("next: find"), "{stdout}");
    assert!(stdout.contains("press a worker's number"), "{stdout}");
    assert!(stdout.contains("timeline in step order"), "{stdout}");
    assert!(stdout.contains("experience_points"), "{stdout}");
    assert!(xp_rows(&stdout).contains(" 2 "), "{}", xp_rows(&stdout));
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn step_without_a_terminal_or_schedule_is_refused() {
    let sandbox = Sandbox::new("step-no-tty");
    sandbox
        .idem()
        .arg("step")
        .write_stdin("")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--schedule"));
}

/// On a terminal, a lesson goes through the pager (`PAGER`), fitted to the
/// terminal's width, without pausing (the pager pages), and ends with its
/// last line; `--no-pager` writes to the terminal itself.
#[test]
fn on_a_terminal_a_lesson_goes_through_the_pager_fitted_to_the_terminal() {
    let sandbox = Sandbox::new("pager");
    let paged = sandbox.dir.join("paged.txt");
    for (flags, through_pager) in [
        ("--no-ask", true),
        ("--no-pager --no-pause --no-ask", false),
    ] {
        let _ = std::fs::remove_file(&paged);
        // `stty cols 72` gives the pseudo-terminal a width to fit to.
        let command = format!("stty cols 72; {{idem}} lesson 1 {flags}");
        let out = in_a_terminal(&sandbox, &command)
            .env("PAGER", format!("cat > {}", paged.display()))
            .env_remove("COLUMNS")
            .stdin(Stdio::null())
            .output()
            .expect("script(1) from util-linux");
        assert!(
            out.status.success(),
            "{flags}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = match through_pager {
            true => std::fs::read_to_string(&paged).expect("the pager got the lesson"),
            false => {
                assert!(!paged.exists(), "--no-pager starts no pager");
                String::from_utf8_lossy(&out.stdout).to_string()
            }
        };
        assert!(text.contains("End of lesson 1."), "{flags}: {text}");
        assert!(!text.contains("(Enter to go on)"), "{flags}: no pauses");
        let wide: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_end_matches('\r').chars().count() > 72)
            .collect();
        assert!(wide.is_empty(), "{flags}: fitted to 72 columns: {wide:?}");
    }
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// A built-in scenario runs by its name, from anywhere; a name that is
/// neither a file nor a built-in scenario is refused in one line.
#[test]
fn a_built_in_scenario_runs_by_its_name_from_any_folder() {
    let sandbox = Sandbox::new("scenario-name");
    for name in ["1-pool-of-six", "scenarios/1-pool-of-six.toml"] {
        sandbox
            .idem()
            .current_dir(&sandbox.dir)
            .args(["scenario", "run", name])
            .assert()
            .success()
            .stdout(predicate::str::contains("scenarios/1-pool-of-six.toml"));
    }
    let out = sandbox
        .idem()
        .current_dir(&sandbox.dir)
        .args(["scenario", "run", "1-no-such-scenario"])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("no built-in scenario of that name"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A scenario's `strategy_file` is read beside the scenario file, not in
/// the folder it is run from, even when that folder holds a file of the
/// same name.
#[test]
fn a_scenarios_guard_file_is_read_beside_the_scenario() {
    let sandbox = Sandbox::new("scenario-beside");
    let lesson = sandbox.dir.join("lesson");
    let elsewhere = sandbox.dir.join("elsewhere");
    std::fs::create_dir_all(&lesson).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let one_row = idem::exercise::EXERCISES[1].solution;
    std::fs::write(lesson.join("guard.toml"), one_row).unwrap();
    // Another folder's guard.toml: lesson 2's flawed file (lesson 1's guard), which makes 4.
    std::fs::write(
        elsewhere.join("guard.toml"),
        idem::exercise::EXERCISES[1].start,
    )
    .unwrap();
    std::fs::write(
        lesson.join("scenario.toml"),
        "title = \"a guard beside\"\nlesson = 1\nexplain = \"one row\"\n\n[race]\nstrategy_file = \"guard.toml\"\n\
         work_ms = 20\n\n[expect]\nruns = 2\nkey_rows = 1\nxp_rows = 1\n",
    )
    .unwrap();
    sandbox
        .idem()
        .current_dir(&elsewhere)
        .args(["scenario", "run", "../lesson/scenario.toml"])
        .assert()
        .success();
}

/// A scenario that fails (its expected XP rows are not the lesson's), in the sandbox.
fn failing_scenario(sandbox: &Sandbox, runs: u32) -> std::path::PathBuf {
    let path = sandbox.dir.join("failing.toml");
    std::fs::write(
        &path,
        format!(
            "title = \"A figure that is not the lesson's\"\nlesson = 1\nexplain = \"It expects 99.\"\n\n[race]\n\
             strategy = \"check-then-store\"\nwork_ms = 20\n\n[expect]\nruns = {runs}\nxp_rows = 99\n"
        ),
    )
    .unwrap();
    path
}

/// The report: a failing scenario exited 0 when its output's
/// reader was gone, or when the pager failed, and the output was lost.
#[test]
fn a_failing_scenario_exits_1_whatever_became_of_its_output() {
    let sandbox = Sandbox::new("exit-status");
    let failing = failing_scenario(&sandbox, 2);
    // `idem scenario run failing.toml | true`: nobody reads stdout.
    let mut child = sandbox
        .idem_std()
        .args(["scenario", "run", failing.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A pager that fails: said on one line, the output on the terminal.
    let out = in_a_terminal(
        &sandbox,
        &format!("{{idem}} scenario run {}", failing.display()),
    )
    .env("IDEM_PAGER", "false")
    .stdin(Stdio::null())
    .output()
    .expect("script(1) from util-linux");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{screen}");
    assert!(
        screen.contains("the pager (false) exited with status 1; writing to the terminal instead"),
        "{screen}"
    );
    assert!(
        screen.contains("A figure that is not the lesson's"),
        "{screen}"
    );
    std::fs::remove_file(&failing).unwrap();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A pager that ignores Ctrl-C does not keep idem from stopping.
#[test]
fn a_pager_that_ignores_ctrl_c_does_not_keep_idem_running() {
    let sandbox = Sandbox::new("stubborn-pager");
    let failing = failing_scenario(&sandbox, 2000);
    let child = in_a_terminal(
        &sandbox,
        &format!("{{idem}} scenario run {}", failing.display()),
    )
    .env("IDEM_PAGER", "trap '' INT; cat > /dev/null; sleep 60")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("script(1) from util-linux");
    assert!(
        sandbox
            .wait_for_ready_cluster(Duration::from_secs(60))
            .is_some(),
        "the run's cluster starts"
    );
    let idem = crate::common::processes()
        .into_iter()
        .find(|p| {
            let idem = assert_cmd::cargo::cargo_bin("idem");
            p.cmdline.trim_end() == format!("{} scenario run {}", idem.display(), failing.display())
        })
        .expect("idem runs");
    let sent = Instant::now();
    crate::common::signal(idem.pid, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
    std::fs::remove_file(&failing).unwrap();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A 400 KB value of the wrong type was echoed whole in its error; it is cut.
#[test]
fn a_long_wrong_value_in_a_scenario_file_is_cut_in_its_error() {
    let sandbox = Sandbox::new("long-value");
    let path = sandbox.dir.join("long.toml");
    std::fs::write(
        &path,
        format!(
            "title = \"t\"\nlesson = 1\nexplain = \"e\"\n[race]\nstrategy = \"check-then-store\"\nworkers = \"{}\"\n",
            "a".repeat(400_000)
        ),
    )
    .unwrap();
    let stderr = crate::common::refused_in_one_line_with(
        sandbox
            .idem()
            .args(["scenario", "run", path.to_str().unwrap()]),
        2,
    );
    assert!(
        stderr.len() < 400,
        "{} bytes: {}",
        stderr.len(),
        &stderr[..400.min(stderr.len())]
    );
    assert!(stderr.contains("long.toml:6:"), "{stderr}");
    assert!(stderr.contains("(cut)"), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}
