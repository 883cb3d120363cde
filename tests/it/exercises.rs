//! Learning by doing: guard files raced as strategies, the exercises' flaws caught and their answers passed, hints in stages.

use std::path::{Path, PathBuf};

use idem::db::{ConnectOptions, Database};
use idem::exercise::{EXERCISES, judge};
use idem::limits::Origin;
use idem::race::options::RaceInput;

use crate::common::races::race;
use crate::common::{Sandbox, refused_in_one_line};

/// Every exercise's files, on each engine it has them for: (the exercise,
/// its start, its answer).
fn starters() -> Vec<(
    &'static idem::exercise::Exercise,
    &'static str,
    &'static str,
)> {
    let on_postgres = EXERCISES.iter().map(|e| (e, e.start, e.solution));
    let on_mariadb = EXERCISES
        .iter()
        .filter_map(|e| e.mariadb.files().map(|m| (e, m.start, m.solution)));
    on_postgres.chain(on_mariadb).collect()
}

/// Every exercise's file fails at least one of its lesson's cases, and its
/// reference answer passes them all, on the real database (PostgreSQL's,
/// and MariaDB's for the exercises written for it too).
#[tokio::test]
async fn every_exercise_fails_as_given_and_its_solution_passes() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-files");
    let mut on_mariadb = 0;
    for (e, given, answer) in starters() {
        on_mariadb += usize::from(given.contains("engine = \"mariadb\""));
        let start = dir.dir.join(e.file);
        let solution = dir.dir.join(e.solution_file());
        std::fs::write(&start, given).unwrap();
        std::fs::write(&solution, answer).unwrap();
        let given = judge(&db, e.lesson, &start).await.unwrap();
        assert!(!given.is_empty(), "lesson {} has no cases", e.lesson);
        assert!(
            given.iter().any(|c| !c.passed()),
            "lesson {}'s exercise passes as given: {given:?}",
            e.lesson
        );
        let answered = judge(&db, e.lesson, &solution).await.unwrap();
        assert!(
            answered.iter().all(|c| c.passed()),
            "lesson {}'s solution fails: {answered:?}",
            e.lesson
        );
    }
    db.close().await.unwrap();
    assert!(on_mariadb >= 1, "no exercise was judged on MariaDB");
}

/// Exercise 1 is played on the real database: each order replayed step
/// by step, judged by the XP rows it left; an order that leaves steps to
/// chance, or names what is not one of the two requests, fails, and two
/// orders that swap the answers fail both cases.
#[tokio::test]
async fn exercise_ones_orders_are_replayed_and_a_wrong_order_fails() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-orders");
    let cases = [
        (
            "makes_two = [1, 1, 2, 2, 1, 1, 2, 2]\nmakes_one = [1, 1, 1, 1, 2, 2]\n",
            [true, true],
            ["2 XP rows", "1 XP row"],
        ),
        (
            "makes_two = [1, 1, 1, 1, 2, 2]\nmakes_one = [1, 1, 2, 2, 1, 1, 2, 2]\n",
            [false, false],
            ["1 XP row", "2 XP rows"],
        ),
        (
            "makes_two = [1, 1, 2, 2]\nmakes_one = [1, \"crash1\", 2, 2]\n",
            [false, false],
            ["give every step", "crash1 is not request 1 or 2"],
        ),
    ];
    for (i, (text, passed, saw)) in cases.into_iter().enumerate() {
        let file = dir.dir.join(format!("orders-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let checks = judge(&db, 1, &file).await.unwrap();
        assert_eq!(checks.len(), 2);
        for ((check, passed), saw) in checks.iter().zip(passed).zip(saw) {
            assert_eq!(check.passed(), passed, "{text}: {check:?}");
            assert!(check.saw.contains(saw), "{text}: {check:?}");
        }
    }
    db.close().await.unwrap();
}

/// The values a starter's line may be changed to in one token: every
/// choice its key takes (the strategies a lesson names, the stores, the
/// levels), a flag flipped, a few sizes and counts. SQL and key templates
/// are the learner's own writing, not a token to flip.
const ONE_TOKEN: &[(&str, &[&str])] = &[
    ("loser", &["\"fail-fast\"", "\"block\"", "\"poll\""]),
    ("store", &["\"cache\"", "\"table\""]),
    ("cache_max_entries", &["1", "50", "100", "1000", "10000"]),
    ("cache_evicts_after", &["0", "1", "49", "50", "51", "60"]),
    (
        "strategy",
        &[
            "\"check-then-store\"",
            "\"claim-work-complete\"",
            "\"guard\"",
        ],
    ),
    ("read_from", &["\"primary\"", "\"standby\""]),
    ("synchronous", &["\"off\"", "\"remote_apply\""]),
    ("transaction", &["\"request\"", "\"none\""]),
    ("sync_wait", &["true", "false"]),
    ("refused_commit", &["\"error\"", "\"read\""]),
    (
        "isolation",
        &[
            "\"read-committed\"",
            "\"repeatable-read\"",
            "\"serializable\"",
        ],
    ),
    ("shape", &["\"find-then-store\"", "\"claim-work-complete\""]),
    ("fingerprint", &["true", "false"]),
    ("engine", &["\"postgres\"", "\"mariadb\""]),
];

/// Every starter whose file changed in one token: each value of a line's
/// key put in its place, and two lines' values swapped (exercise 1's
/// orders, swapped, were once its answer).
fn one_token_changes(start: &str) -> Vec<String> {
    let lines: Vec<&str> = start.lines().collect();
    // The lines of a choice (a key of ONE_TOKEN, or a list), outside the
    // SQL steps' multi-line strings.
    let mut in_sql = vec![false; lines.len()];
    let mut open = false;
    for (i, line) in lines.iter().enumerate() {
        in_sql[i] = open;
        open ^= line.matches("'''").count() % 2 == 1;
    }
    let value_of = |i: usize| {
        let (key, value) = lines[i].split_once(" = ")?;
        let (key, value) = (key.trim(), value.trim());
        let chosen = ONE_TOKEN.iter().any(|(k, _)| *k == key) || value.starts_with('[');
        (chosen && !in_sql[i] && !lines[i].starts_with('#')).then_some((key, value))
    };
    // The starter with some of its lines given anew.
    let with = |given: &[(usize, String)]| -> String {
        let mut mutant: Vec<&str> = lines.clone();
        for (i, line) in given {
            mutant[*i] = line;
        }
        mutant.join("\n")
    };
    let mut changed = Vec::new();
    for i in 0..lines.len() {
        let Some((key, value)) = value_of(i) else {
            continue;
        };
        let choices = ONE_TOKEN.iter().find(|(k, _)| *k == key).map(|(_, c)| *c);
        for choice in choices.unwrap_or_default().iter().filter(|c| **c != value) {
            changed.push(with(&[(i, format!("{key} = {choice}"))]));
        }
        for j in i + 1..lines.len() {
            if let Some((other_key, other_value)) = value_of(j)
                && other_value != value
            {
                changed.push(with(&[
                    (i, format!("{key} = {other_value}")),
                    (j, format!("{other_key} = {value}")),
                ]));
            }
        }
    }
    changed
}

/// No starter passes its check after a change of one token: each leaves
/// its lesson's idea to the learner. (Where the change makes a file the
/// reader refuses, that is not a pass either.)
#[tokio::test]
async fn no_starter_passes_with_one_token_changed() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-one-token");
    let mut tried = 0;
    let mut passed = Vec::new();
    for (i, (e, start, _)) in starters().into_iter().enumerate() {
        for (n, text) in one_token_changes(start).into_iter().enumerate() {
            let file = dir.dir.join(format!("{}-{i}-{n}.toml", e.lesson));
            std::fs::write(&file, &text).unwrap();
            tried += 1;
            let Ok(checks) = judge(&db, e.lesson, &file).await else {
                continue;
            };
            if checks.iter().all(|c| c.passed()) {
                let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
                passed.push(format!("exercise {}: {}", e.lesson, body.join(" / ")));
            }
        }
    }
    db.close().await.unwrap();
    assert!(tried >= 20, "only {tried} one-token changes tried");
    assert!(passed.is_empty(), "{passed:#?}");
}

/// Exercise 3 needs the trade-off of lesson 3: each wrong choice fails the
/// case that shows its cost. Block starves twenty requests on four
/// connections; a poll every 250 ms answers too late; a poll every 5 ms
/// reads too often; a wait shorter than the work gives up with 409.
#[tokio::test]
async fn exercise_threes_wrong_loser_fails_the_case_that_shows_its_cost() {
    let _timing = crate::common::TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-loser");
    let choices = [
        ("loser = \"block\"\n", "twenty on four connections"),
        ("loser = \"poll\"\npoll_ms = 250\n", "five at once"),
        ("loser = \"poll\"\npoll_ms = 5\n", "reads while waiting"),
        (
            "loser = \"poll\"\npoll_ms = 25\nwait_timeout_ms = 200\n",
            "five at once",
        ),
    ];
    for (i, (text, fails)) in choices.into_iter().enumerate() {
        let file = dir.dir.join(format!("loser-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let checks = judge(&db, 3, &file).await.unwrap();
        let failing = checks.iter().find(|c| c.case == fails).unwrap();
        assert!(!failing.passed(), "{text}: {checks:?}");
    }
    let file = dir.dir.join("both.toml");
    std::fs::write(&file, "loser = \"block\"\npoll_ms = 5\n").unwrap();
    let refused = format!("{:#}", judge(&db, 3, &file).await.unwrap_err());
    assert!(refused.contains("poll_ms applies to"), "{refused}");
    db.close().await.unwrap();
}

/// Exercise 4's fingerprint is the file's own, and each way of getting it
/// wrong fails exactly the case it should: a field left out fails the
/// race on that field, fields run together fail the collision, idem's own
/// `$fingerprint` fails "the file's own", a random one tells retries 422
/// (in every race where two requests ask as the winner did).
#[tokio::test]
async fn exercise_fours_fingerprint_without_a_field_fails_that_fields_case() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-fingerprint");
    let e = EXERCISES.iter().find(|e| e.lesson == 4).unwrap();
    let fields = "concat_ws('|', $operation, $user_id, $amount, $lesson)";
    let own = format!("fingerprint = '''\nSELECT md5({fields})\n'''\n");
    assert!(
        e.solution.contains(&own),
        "the solution's fingerprint step changed"
    );
    let without = |field: &str| {
        let kept = fields.replace(&format!(", {field}"), "");
        e.solution.replace(fields, &kept)
    };
    let broken = [
        (without("$amount"), "other amounts"),
        (without("$lesson"), "other lessons"),
        (without("$user_id"), "other users"),
        (
            e.solution
                .replace(fields, "$operation || $user_id || $amount || $lesson"),
            "fields run together",
        ),
        (e.solution.replace(&own, ""), "the file's own fingerprint"),
        // Whoever wins, two requests ask as it did and are told 422.
        (
            e.solution.replace(fields, "random()::text"),
            "fields run together",
        ),
    ];
    for (i, (text, fails)) in broken.iter().enumerate() {
        let file = dir.dir.join(format!("fingerprint-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let checks = judge(&db, 4, &file).await.unwrap();
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed())
            .map(|c| c.case)
            .collect();
        assert!(failed.contains(fails), "{fails} should fail: {checks:?}");
        // Each flaw but the random fingerprint fails its case alone.
        if i < 5 {
            assert_eq!(failed, [*fails], "only {fails} catches it: {checks:?}");
        }
    }
    db.close().await.unwrap();
}

/// Exercise 9's renew step is what keeps a slow owner's claim: the
/// solution with a renewal that changes nothing fails the slow-work case
/// (the retry takes the live claim over, a second service call), and one
/// that renews for an hour fails the dropped-request case (the claim never
/// goes stale). The renew step runs from the heartbeat's connection, for
/// the running claim only, and stops when the request's future is dropped.
#[tokio::test]
async fn exercise_nines_renewal_keeps_a_working_claim_and_lets_a_dropped_one_go() {
    let _timing = crate::common::TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-heartbeat");
    let e = EXERCISES.iter().find(|e| e.lesson == 9).unwrap();
    let renewal = "SET locked_at = now()\nWHERE id = $claim_id";
    assert!(
        e.solution.contains(renewal),
        "the solution's renewal changed"
    );
    let broken = [
        (
            "SET locked_at = locked_at\nWHERE id = $claim_id",
            "slow work, retried",
        ),
        (
            "SET locked_at = now() + interval '1 hour'\nWHERE id = $claim_id",
            "request dropped mid-work",
        ),
    ];
    for (i, (instead, fails)) in broken.into_iter().enumerate() {
        let file = dir.dir.join(format!("renew-{i}.toml"));
        std::fs::write(&file, e.solution.replace(renewal, instead)).unwrap();
        let checks = judge(&db, 9, &file).await.unwrap();
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed())
            .map(|c| c.case)
            .collect();
        assert_eq!(failed, [fails], "{instead}: {checks:?}");
    }
    db.close().await.unwrap();
}

/// Exercise 10 needs both of lesson 10's ideas: a claim with asynchronous
/// commits loses the answered key in the failover, and check-then-store
/// with synchronous commits still lets the lagging standby's stale finds
/// (and the failover's retry) do the work again.
#[tokio::test]
async fn exercise_tens_choice_needs_the_claim_and_a_commit_that_waits() {
    let _timing = crate::common::TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-standby");
    let e = EXERCISES.iter().find(|e| e.lesson == 10).unwrap();
    let remote = "synchronous = \"remote_apply\"";
    assert!(
        e.solution.contains(remote),
        "the solution's commits changed"
    );
    let asynchronous = e.solution.replace(remote, "synchronous = \"off\"");
    let finds = e.start.replace("synchronous = \"off\"", remote);
    let choices = [
        (asynchronous.as_str(), ["failover after a 201"].as_slice()),
        (
            finds.as_str(),
            ["a standby 200 ms behind", "failover after a 201"].as_slice(),
        ),
    ];
    for (i, (text, fails)) in choices.into_iter().enumerate() {
        let file = dir.dir.join(format!("standby-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let checks = judge(&db, 10, &file).await.unwrap();
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed())
            .map(|c| c.case)
            .collect();
        assert_eq!(failed, fails, "{text}: {checks:?}");
    }
    db.close().await.unwrap();
}

/// A guard file races as the built-in strategy of its shape does: lesson
/// 2's file, lesson 1's guard, is check-then-store's figure, and its JSON names the file.
#[tokio::test]
async fn a_guard_file_of_lesson_one_makes_the_course_figure() {
    let _timing = crate::common::TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("guard-file-figure");
    let file = dir.dir.join("2-claim-first.toml");
    std::fs::write(&file, EXERCISES[1].start).unwrap();
    let settings = RaceInput::default()
        .with(|r| {
            r.strategy.strategy_file = Some(file.clone());
            r.app.work_ms = Some(100);
        })
        .build(Origin::Flags)
        .unwrap();
    let r = race(&db, settings).await;
    // Five workers on a pool of five, the runner holding one: at most four
    // find nothing (four in 99% of runs, as race.rs measures for the built-in).
    assert_eq!(r.key_rows, 1);
    assert!((2..=4).contains(&r.xp_rows), "{} XP rows", r.xp_rows);
    assert_eq!(r.service_calls, r.xp_rows);
    assert_eq!(r.strategy_file, Some(file.to_str().unwrap()));
    let steps: Vec<&str> = r.reports[0].steps.iter().filter_map(|e| e.sql).collect();
    assert!(
        steps.iter().any(|sql| sql.contains("WHERE key = $key")),
        "the trace shows the file's own statement: {steps:?}"
    );
    db.close().await.unwrap();
}

/// The learner's folder, beside the sandbox (whose emptiness says idem
/// left nothing behind), removed with the test.
struct Workdir(PathBuf);

impl Workdir {
    fn beside(sandbox: &Sandbox) -> Self {
        let dir = sandbox.dir.with_extension("work");
        std::fs::create_dir_all(&dir).unwrap();
        Workdir(dir)
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Failed work (`--fail-work`) in a claim-work-complete file: its release
/// step lets the claim go and the retry works; without one, the claim
/// stays pending and the retry is told 409.
#[tokio::test]
async fn a_release_step_lets_the_retry_work_after_failed_work() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("guard-file-release");
    let released = EXERCISES[1].solution.to_string()
        + "\nrelease = \"DELETE FROM idempotency_keys WHERE id = $claim_id AND status = 'pending'\"\n";
    let mut seen = Vec::new();
    for (name, text) in [
        ("kept.toml", EXERCISES[1].solution),
        ("released.toml", &released),
    ] {
        let file = dir.dir.join(name);
        std::fs::write(&file, text).unwrap();
        let settings = RaceInput::default()
            .with(|r| {
                r.strategy.strategy_file = Some(file);
                r.shape.workers = Some(1);
                r.faults.fail_work = Some(1);
            })
            .build(Origin::Flags)
            .unwrap();
        let r = race(&db, settings).await;
        seen.push((r.xp_rows, r.pending_key_rows, r.retry_statuses()));
    }
    assert_eq!(seen, [(0, 1, vec![409]), (1, 0, vec![201])]);
    db.close().await.unwrap();
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// What is wrong with a file is one line naming the file's line: bad
/// TOML, an unknown step, an unknown parameter, and a statement the
/// database refuses (prepared before the race, on the run's tables).
/// A Galera cluster's answer to a refused COMMIT is MariaDB's to choose, and
/// only between its two answers: each refusal one line, naming the file.
#[test]
fn a_guard_files_refused_commit_is_mariadbs_and_one_of_two_answers() {
    let sandbox = Sandbox::new("guard-file-refused");
    let work = Workdir::beside(&sandbox);
    let good = EXERCISES[1].solution;
    let refused = |word: &str| {
        good.replace(
            "[steps]",
            &format!("refused_commit = \"{word}\"\n\n[steps]"),
        )
    };
    let path = write(&work.0, "refused.toml", &refused("read"));
    let line = refused_in_one_line(sandbox.idem().args(["race", "--strategy-file", &path]));
    assert!(
        line.contains("refused_commit answers a Galera cluster's"),
        "{line}"
    );
    let mariadb = EXERCISES[10]
        .solution
        .replace("refused_commit = \"read\"", "refused_commit = \"retry\"");
    let path = write(&work.0, "refused-word.toml", &mariadb);
    let line = refused_in_one_line(sandbox.idem().args([
        "race",
        "--engine",
        "mariadb",
        "--strategy-file",
        &path,
    ]));
    let at = 1 + mariadb
        .lines()
        .position(|l| l.starts_with("refused_commit"))
        .unwrap();
    let said = format!("line {at}: unknown variant `retry`, expected `error` or `read`");
    assert!(line.contains(&said), "{line}");
}

#[test]
fn a_broken_guard_file_is_refused_in_one_line_naming_its_line() {
    let sandbox = Sandbox::new("guard-file-errors");
    let work = Workdir::beside(&sandbox);
    let good = EXERCISES[1].solution;
    let cases = [
        (
            "syntax.toml",
            good.replace("[steps]", "[steps"),
            "line 9: unclosed table",
        ),
        (
            "step.toml",
            good.replace("replay =", "replay_it ="),
            "claim-work-complete has no step \"replay_it\"",
        ),
        (
            "param.toml",
            good.replace("WHERE id = $claim_id", "WHERE id = $claim"),
            "step complete: $claim is not a parameter idem gives",
        ),
        (
            "column.toml",
            good.replace("SET status = 'completed'", "SET stauts = 'completed'"),
            "step complete: column \"stauts\" of relation \"idempotency_keys\" does not exist",
        ),
    ];
    for (name, text, said) in cases {
        let path = write(&work.0, name, &text);
        let line = refused_in_one_line(sandbox.idem().args(["race", "--strategy-file", &path]));
        assert!(line.contains(said), "{name}: {line}");
        assert!(line.contains(&path), "{name} names the file: {line}");
        assert!(line.contains(" line "), "{name} names the line: {line}");
    }
    // What a file's commits wait for: one of two words, and not another
    // than the command line's.
    let synchronous =
        |word: &str| good.replace("[steps]", &format!("synchronous = \"{word}\"\n\n[steps]"));
    let path = write(&work.0, "sync.toml", &synchronous("fast"));
    let line = refused_in_one_line(sandbox.idem().args(["race", "--strategy-file", &path]));
    assert!(
        line.contains("synchronous is \"off\" or \"remote_apply\", not \"fast\""),
        "{line}"
    );
    let path = write(&work.0, "sync-flag.toml", &synchronous("remote_apply"));
    let line = refused_in_one_line(sandbox.idem().args([
        "race",
        "--strategy-file",
        &path,
        "--standby",
        "--synchronous",
        "off",
    ]));
    assert!(
        line.contains("says remote_apply; --synchronous off says otherwise"),
        "{line}"
    );
    // Lesson 6's key file and lesson 5's store file say what is wrong alike.
    let key = write(&work.0, "key.toml", "key = \"{operation}:{user}\"\n");
    let line = refused_in_one_line(sandbox.idem().args(["check", "6", &key]));
    assert!(
        line.contains("key.toml line 1: {user} is not a field"),
        "{line}"
    );
    let store = write(&work.0, "store.toml", "store = \"cache\"\ncache_size = 5\n");
    let line = refused_in_one_line(sandbox.idem().args(["check", "5", &store]));
    assert!(
        line.contains("store.toml line 2: unknown field `cache_size`"),
        "{line}"
    );
    let line = refused_in_one_line(sandbox.idem().args([
        "race",
        "--strategy-file",
        &write(&work.0, "ok.toml", good),
        "-s",
        "guard",
    ]));
    assert_eq!(
        line,
        "error: --strategy-file is the strategy; drop --strategy guard"
    );
    assert_eq!(
        sandbox.wait_clean(std::time::Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// The learner's loop: the exercise written (never over a file), checked
/// (exit 1 until it holds), hinted in stages, passed and kept.
#[test]
fn an_exercise_is_written_checked_hinted_and_kept_when_passed() {
    let sandbox = Sandbox::new("exercise-loop");
    let work = Workdir::beside(&sandbox);
    let here = |cmd: &mut assert_cmd::Command| {
        cmd.current_dir(&work.0);
    };
    let mut exercise = sandbox.idem();
    here(&mut exercise);
    let out = exercise.args(["exercise", "2"]).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(said.contains("idem check 2 2-claim-first.toml"), "{said}");
    let file = work.0.join("2-claim-first.toml");
    std::fs::write(&file, "# the learner's work\n").unwrap();
    let mut again = sandbox.idem();
    here(&mut again);
    let line = refused_in_one_line(again.args(["exercise", "2"]));
    assert!(line.contains("never writes over it"), "{line}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# the learner's work\n"
    );
    std::fs::write(&file, EXERCISES[1].start).unwrap();

    let mut check = sandbox.idem();
    here(&mut check);
    let out = check.args(["check", "2"]).assert().code(1);
    let output = out.get_output();
    assert!(String::from_utf8_lossy(&output.stdout).contains("FAIL"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("idem hint 2"));

    // The solution is not shown before the learner tried: after a pass,
    // or after the last hint.
    let mut early = sandbox.idem();
    here(&mut early);
    let line = refused_in_one_line(early.args(["exercise", "2", "--solution"]));
    assert!(line.contains("the solution comes after you pass"), "{line}");
    assert!(!work.0.join("2-claim-first.solution.toml").exists());

    let hint = |n: &str| {
        let out = sandbox.idem().args(["hint", "2"]).assert().success();
        let said = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        assert!(said.contains(&format!("hint {n} of 3")), "{said}");
        said
    };
    hint("1");
    hint("2");
    assert!(hint("3").contains("idem exercise 2 --solution"));
    hint("3");

    let mut solution = sandbox.idem();
    here(&mut solution);
    solution
        .args(["exercise", "2", "--solution"])
        .assert()
        .success();
    let mut check = sandbox.idem();
    here(&mut check);
    let out = check
        .args(["check", "2", "2-claim-first.solution.toml"])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("3 of 3 cases hold"));
    let out = sandbox.idem().args(["hint", "2"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("Why it works"));
    let out = sandbox.idem().arg("progress").assert().success();
    assert!(
        String::from_utf8_lossy(&out.get_output().stdout).contains("exercises passed: 1 of 11 (2)")
    );

    assert_eq!(
        sandbox.wait_clean(std::time::Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A guard file's request dropped in the middle of its work (the client
/// gone), inside a request transaction and without one: its connection is
/// closed, not given back with the transaction open, the lock it held goes
/// with it, and the next request with the key finishes with one XP row.
#[tokio::test]
async fn a_guard_files_request_dropped_mid_work_leaves_no_open_transaction() {
    use idem::db::pool::warm_pool;
    use idem::race::{Lease, Request, Trace};
    use std::time::{Duration, Instant};

    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("guard-file-dropped");
    // Lesson 8's answer: the whole request in one transaction, behind a lock.
    // Lesson 7's: a committed claim, taken over once stale.
    for (name, text) in [
        ("8.toml", EXERCISES[7].solution),
        ("7.toml", EXERCISES[6].solution),
    ] {
        db.reset().await.unwrap();
        let file = dir.dir.join(name);
        std::fs::write(&file, text).unwrap();
        let settings = RaceInput::default()
            .with(|r| {
                r.strategy.strategy_file = Some(file);
                r.guard.stale_after_ms = Some(300);
            })
            .build(Origin::Flags)
            .unwrap();
        let strategy = settings.build_strategy();
        // Its own name, so that only its connection is counted below.
        let mut connect = db.workers_config().clone();
        connect.config.application_name("guard-file-dropped");
        let pool = warm_pool(&connect, 1).await.unwrap();
        let request = |worker, work| {
            Request::new(
                worker,
                format!("dropped-{name}"),
                settings.params(1),
                true,
                work,
            )
        };
        // The work takes a minute; the request is dropped after 300 ms.
        let slow = request(1, Duration::from_secs(60));
        let mut lease = Lease::new(pool.clone(), Duration::from_secs(5));
        let mut trace = Trace::new(Instant::now());
        let dropped = tokio::time::timeout(
            Duration::from_millis(300),
            strategy.handle(&mut lease, &slow, &mut trace),
        )
        .await;
        assert!(dropped.is_err(), "{name}: the request was still working");
        drop(lease);
        // A closed connection's server process takes a moment to go; one
        // given back to the pool inside the transaction would stay.
        let mut open: i64 = 1;
        for _ in 0..100 {
            let mut tx = db.book().await.unwrap();
            open = idem::db::book::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'guard-file-dropped'
                   AND state LIKE 'idle in transaction%'",
            )
            .fetch_one(&mut *tx)
            .await
            .unwrap();
            tx.commit().await.unwrap();
            if open == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            open, 0,
            "{name}: a connection went back inside the dropped transaction"
        );
        // Past the stale-claim timeout, the next request with the key works.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let retry = request(2, Duration::ZERO);
        let mut lease = Lease::new(pool.clone(), Duration::from_secs(5));
        let mut trace = Trace::new(Instant::now());
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            strategy.handle(&mut lease, &retry, &mut trace),
        )
        .await
        .expect("the retry is not blocked by the dropped request")
        .unwrap();
        lease.release();
        assert_eq!(answer.outcome, idem::race::Outcome::Created, "{name}");
        let counts = db.counts(&format!("dropped-{name}")).await.unwrap();
        assert_eq!(counts.xp_rows, 1, "{name}");
    }
    db.close().await.unwrap();
}

/// Every command an exercise prints pastes whole from an 80-column
/// screen: no line is wider, and a command broken over lines ends each
/// but its last with ` \`, so the shell reads it back as one.
#[test]
fn every_exercises_commands_paste_whole_at_80_columns() {
    for e in EXERCISES {
        let sandbox = Sandbox::new("exercise-paste");
        let out = sandbox
            .idem()
            .current_dir(&sandbox.dir)
            .env("COLUMNS", "80")
            .args(["exercise", &e.lesson.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}");
        assert!(
            text.lines().all(|l| l.chars().count() <= 80),
            "lesson {}: {text}",
            e.lesson
        );
        let commands: String = text
            .split("when stuck:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("lesson {}: {text}", e.lesson))
            .replace(" \\\n    ", " ");
        let first = commands.lines().next().unwrap().trim();
        assert_eq!(
            first,
            e.try_it.replace("{file}", e.file),
            "lesson {}",
            e.lesson
        );
    }
}
