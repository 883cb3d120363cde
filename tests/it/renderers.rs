//! The renderers, fed made-up results and compared with reviewed snapshots.
//!
//! No database: each result is written here by hand, with round timings, so
//! a snapshot changes only when the wording or the layout does, and then as
//! a diff to review (`cargo insta review`). What the figures are on a real
//! race is asserted elsewhere, against PostgreSQL.

use idem::db::RowCounts;
use idem::limits::Origin;
use idem::probe::conformance::Check;
use idem::race::options::RaceInput;
use idem::race::{Outcome, RaceResult, RaceSettings, WorkerReport};
use idem::report;
use idem::report::runs::RunsSummary;
use idem::request::{Params, Step, StepEvent};
use idem::strategy::StrategyKind;

/// Plain text at the width a file or a pipe gets.
fn plain() {
    report::style::init(Some(false));
    report::width::fix(report::width::UNSAID);
}

/// The text as `emit` writes it: fitted to the width.
fn shown(text: String) -> String {
    report::width::fit(&text, report::width::width())
}

fn settings(strategy: StrategyKind) -> RaceSettings {
    plain();
    RaceInput::with_strategy(strategy)
        .build(Origin::Flags)
        .unwrap()
}

fn step(step: Step, start_ms: f64, end_ms: f64, note: &str) -> StepEvent {
    StepEvent {
        step,
        start_ms,
        end_ms,
        note: note.to_string(),
        sql: None,
    }
}

/// One worker's report: `outcome` after a checkout, a find and, for those
/// that did it, the work.
fn worker(worker: usize, outcome: Outcome, status: u16, waited_ms: f64) -> WorkerReport {
    let did_work = outcome == Outcome::Created;
    let start = waited_ms;
    let mut steps = vec![
        step(Step::Checkout, 0.0, start, "got a connection"),
        step(Step::Find, start, start + 1.0, "no key"),
    ];
    if did_work {
        steps.push(step(
            Step::Work,
            start + 1.0,
            start + 21.0,
            "made an XP row",
        ));
    }
    WorkerReport {
        worker,
        params: Params {
            operation: "award_xp",
            user_id: 42,
            amount: 10,
            lesson: 1,
        },
        fingerprint: None,
        outcome,
        status,
        checkout_wait_ms: waited_ms,
        saw: if did_work { "no key" } else { "the key" }.into(),
        did: if did_work { "the work" } else { "replayed" }.into(),
        made_xp: did_work.then_some(worker as i64),
        body: None,
        answer_ms: start + 22.0,
        queries: 3,
        checkouts: 1,
        waited: None,
        wrong_replay: None,
        replica: None,
        retry: false,
        blocked_by: Vec::new(),
        error: None,
        retries: 0,
        held_ms: 22.0,
        steps,
    }
}

/// Lesson 1's figure, written out: four workers found no key and did the
/// work; the fifth waited for a connection and found the key stored.
fn lesson_one(run: usize) -> RaceResult {
    let reports = vec![
        worker(1, Outcome::Created, 201, 0.0),
        worker(2, Outcome::Created, 201, 0.0),
        worker(3, Outcome::Created, 201, 0.0),
        worker(4, Outcome::Created, 201, 0.0),
        worker(5, Outcome::Replayed, 201, 23.0),
    ];
    measured(StrategyKind::CheckThenStore, run, reports, (4, 4), 48)
}

/// A race of `strategy` whose workers reported `reports`, with one key row
/// and `(xp_rows, service_calls)`, in `elapsed_ms`.
fn measured(
    strategy: StrategyKind,
    run: usize,
    reports: Vec<WorkerReport>,
    (xp_rows, service_calls): (u64, u64),
    elapsed_ms: u64,
) -> RaceResult {
    let counts = RowCounts {
        key_rows: 1,
        pending_key_rows: 0,
        xp_rows,
        kept_xp: Some(1),
    };
    let s = settings(strategy);
    let elapsed = std::time::Duration::from_millis(elapsed_ms);
    let mut r = RaceResult::new(run, &s, counts, reports, elapsed);
    r.elapsed_ms = elapsed_ms as f64;
    r.service_calls = service_calls;
    r
}

#[test]
fn one_race_renders_its_figures_and_its_workers() {
    insta::assert_snapshot!(shown(report::race::render(&lesson_one(1))));
}

#[test]
fn the_settings_line_names_the_pool_and_the_runners_connection() {
    insta::assert_snapshot!(shown(report::race::settings_line(&lesson_one(1))));
}

#[test]
fn many_runs_render_as_a_distribution() {
    let mut summary = RunsSummary::default();
    for run in 1..=20 {
        summary.add(&lesson_one(run));
    }
    let line = report::race::settings_line(&lesson_one(1));
    insta::assert_snapshot!(shown(report::runs::render_summary(
        &summary,
        &line,
        "check-then-store"
    )));
}

#[test]
fn a_comparison_renders_a_row_per_strategy() {
    let mut broken = RunsSummary::default();
    broken.add(&lesson_one(1));
    let mut sound = RunsSummary::default();
    let mut one = lesson_one(1);
    one.strategy = StrategyKind::ClaimWorkComplete;
    (one.xp_rows, one.duplicates, one.lesson_figure) = (1, 0, 1);
    one.outcomes = [(Outcome::Created, 1), (Outcome::Conflict, 4)].into();
    sound.add(&one);
    let rows = vec![
        ("check-then-store".to_string(), broken),
        ("claim-work-complete".to_string(), sound),
    ];
    let line = report::race::settings_line(&lesson_one(1));
    insta::assert_snapshot!(shown(report::runs::render_compare(
        &rows, &line, "strategy"
    )));
}

#[test]
fn a_challenge_renders_each_case_with_its_mark() {
    plain();
    let cases = vec![
        Check::judged(
            "five-worker race",
            "exactly 1 XP row when five requests with one key arrive at once",
            true,
            "1 XP row; 201 created ×1, 409 conflict ×4".into(),
        ),
        Check::judged(
            "fingerprint",
            "1 XP row, and 422 for every request whose amount differs from the first",
            false,
            "1 XP row; 201 created ×1, 200 replayed ×4".into(),
        ),
    ];
    insta::assert_snapshot!(shown(report::challenge::render("a made-up guard", &cases)));
}

/// A case that could not be judged is counted apart: the count of cases
/// that hold is out of the cases judged, and the n/a are said.
#[test]
fn a_case_not_judged_is_counted_apart_from_the_held_and_failed() {
    plain();
    let cases = vec![
        Check::judged("one", "holds", true, "held".into()),
        Check::judged("two", "holds", false, "broke".into()),
        Check::not_applicable("three", "holds", "the bound stopped the walk".into()),
    ];
    let text = shown(report::challenge::render_checks("three cases", &cases));
    assert!(
        text.contains("1 of 2 cases hold; 1 n/a, not judged"),
        "{text}"
    );
}

/// Lesson 1's race again, as lesson 8 runs it in one serializable
/// transaction per request: the three duplicates rolled back on 40001.
fn lesson_one_serializable(run: usize) -> RaceResult {
    use idem::request::DbError;
    use idem::strategy::transaction::{Isolation, Transaction};
    let mut r = lesson_one(run);
    r.transaction = Transaction::Request;
    r.isolation = Some(Isolation::Serializable);
    r.xp_rows = 1;
    r.duplicates = 0;
    for w in r.reports.iter_mut().skip(1).take(3) {
        w.outcome = Outcome::Error;
        w.status = 500;
        w.made_xp = None;
        w.error = Some(DbError::from_code(
            &tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE,
        ));
    }
    r
}

#[test]
fn the_matrix_groups_its_rows_by_shape_with_a_legend() {
    let rows = vec![
        vec![lesson_one(1), lesson_one(2)],
        vec![lesson_one_serializable(1), lesson_one_serializable(2)],
    ];
    let matrix = idem::matrix::Matrix::of(&rows).unwrap();
    insta::assert_snapshot!(shown(report::matrix::render(&matrix)));
}

/// Lesson 7's guard after a crash mid-work: one XP row, and the crashed
/// request's call beside the retry's. The second call is marked as what
/// a crash makes of any guard (at least once), with what would save it,
/// not as a failure of the guard.
#[test]
fn a_crash_mid_work_marks_the_second_call_as_expected() {
    let mut crashed = worker(1, Outcome::Crashed, 0, 0.0);
    // Its work had begun (it called the service) when the crash struck.
    crashed
        .steps
        .push(step(Step::Work, 1.0, 11.0, "called the service"));
    crashed.steps.push(step(Step::Fault, 11.0, 11.0, "crashed"));
    let mut retry = worker(6, Outcome::Created, 201, 0.0);
    retry.retry = true;
    let reports = vec![
        crashed,
        worker(2, Outcome::Conflict, 409, 0.0),
        worker(3, Outcome::Conflict, 409, 0.0),
        worker(4, Outcome::Conflict, 409, 0.0),
        worker(5, Outcome::Conflict, 409, 0.0),
        retry,
    ];
    let r = measured(StrategyKind::Guard, 1, reports, (1, 2), 1048);
    let text = shown(report::race::render(&r));
    let calls = text
        .lines()
        .skip_while(|l| !l.contains("service calls"))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(calls);
}

/// A scenario's marks read as sentences: a rate says how many runs showed
/// the figure, and a title is marked ✓, not "ok".
#[test]
fn a_scenario_verdict_says_its_rates_in_runs() {
    use idem::scenario::{Check, Verdict};
    plain();
    let verdict = Verdict {
        source: "scenarios/5-cache-claims-duplicate.toml".into(),
        title: "Claims in the cache store duplicate work".into(),
        lesson: 5,
        checks: vec![Check {
            what: "XP rows".into(),
            expected: "1 in at most 50% of the runs".into(),
            actual: "4 ×18, 3 ×2: 1 in 0 of 20 runs".into(),
            ok: true,
        }],
        skipped: None,
        results: Vec::new(),
        engine_results: Vec::new(),
        explored: None,
    };
    insta::assert_snapshot!(format!(
        "{}{}",
        report::scenario::render_verdict(&verdict),
        report::scenario::render_verdict_line(&verdict)
    ));
}
