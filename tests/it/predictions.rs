//! Predict, then observe: in a real pseudo-terminal, a lesson asks for its figure before any screen tells it, puts the answer beside the race's figure (a wrong one said to be wrong), keeps it in the progress file, and stops calmly on Ctrl-C at the question.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use crate::common::Sandbox;
use crate::teaching::in_a_terminal;

/// `idem lesson 4` at a terminal fed `keys`, its input held open until it
/// ends: whether it succeeded, and what it printed.
fn lesson_four(sandbox: &Sandbox, keys: &[u8]) -> (Option<i32>, String) {
    let out = fed(
        &mut in_a_terminal(sandbox, "{idem} lesson 4 --no-pause"),
        keys,
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

/// `terminal` (a command in a pseudo-terminal) run with `keys` typed and
/// its input held open until it ends.
fn fed(terminal: &mut std::process::Command, keys: &[u8]) -> std::process::Output {
    let mut child = terminal
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(keys).unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    out
}

#[test]
fn a_prediction_is_asked_before_the_screens_and_judged_beside_the_figure() {
    let sandbox = Sandbox::new("predict");
    let (code, right) = lesson_four(&sandbox, b"2");
    assert_eq!(code, Some(0), "{right}");
    let asked = right
        .find("Predict: Five requests share one key")
        .expect(&right);
    let first_screen = right
        .find("A key says which request this is")
        .unwrap_or(usize::MAX);
    assert!(asked < first_screen, "asked before the screens: {right}");
    assert!(
        right.contains("You said 2: right, 2 wrong replays."),
        "{right}"
    );
    // Under the race's card, whose figure it judges, not above it.
    let card = right.find("  wrong replays ").expect(&right);
    let told = right.find("You said 2").unwrap();
    assert!(card < told, "the verdict comes under the figure: {right}");
    let (code, wrong) = lesson_four(&sandbox, b"0");
    assert_eq!(code, Some(0), "{wrong}");
    assert!(
        wrong.contains("You said 0; the race made 2 wrong replays."),
        "a wrong answer is told it is wrong: {wrong}"
    );
    let kept = std::fs::read_to_string(sandbox.state().join("idem/progress.toml")).unwrap();
    assert!(kept.contains("[predictions.4-no-fingerprint]"), "{kept}");
    assert!(kept.contains("said = 0"), "the last answer is kept: {kept}");
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn no_question_is_asked_off_a_terminal_or_with_no_ask() {
    let sandbox = Sandbox::new("predict-off");
    let out = sandbox
        .idem()
        .args(["lesson", "4", "--no-pause"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Predict:"));
    let (code, at_terminal) = {
        let child = in_a_terminal(&sandbox, "{idem} --no-pager lesson 4 --no-pause --no-ask")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            child.status.code(),
            String::from_utf8_lossy(&child.stdout).to_string(),
        )
    };
    assert_eq!(code, Some(0), "{at_terminal}");
    assert!(!at_terminal.contains("Predict:"), "{at_terminal}");
}

/// `command` at a terminal; once `marker` is on the screen, Ctrl-C is
/// typed. Its exit status and what it printed.
fn ctrl_c_once(sandbox: &Sandbox, command: &str, marker: &'static str) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = in_a_terminal(sandbox, command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains(marker) {
                let _ = tx.send(());
            }
        }
        String::from_utf8_lossy(&seen).to_string()
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{marker} never showed"));
    stdin.write_all(b"\x03").unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    (status.code(), reader.join().unwrap())
}

/// Ctrl-C typed once the question is on the screen (not before: a
/// signal before idem has started is not this test's case), and at a
/// lesson's pause: idem stops at once, calmly, and leaves nothing.
#[test]
fn ctrl_c_at_the_question_or_the_pause_ends_calmly_and_leaves_nothing() {
    let sandbox = Sandbox::new("predict-ctrl-c");
    for (command, marker) in [
        ("{idem} lesson 4 --no-pause", "skips):"),
        ("{idem} --no-pager lesson 2 --no-ask", "(Enter to go on)"),
    ] {
        let (code, out) = ctrl_c_once(&sandbox, command, marker);
        assert_eq!(code, Some(130), "{command}: {out}");
        assert!(out.contains("interrupted by SIGINT"), "{command}: {out}");
        assert!(!out.contains("panicked"), "{out}");
        assert_eq!(
            sandbox.wait_clean(Duration::from_secs(10)),
            Vec::<String>::new()
        );
    }
}

/// At a terminal of 30 rows, a lesson pauses before its text would push a
/// row not yet read off the screen: between two pauses (and before the
/// first) at most 29 rows are shown, the prompt's row aside, demonstrations
/// included (a race card with its table is longer than a screen).
#[test]
fn a_lesson_at_a_terminal_pauses_before_the_screen_overflows() {
    let sandbox = Sandbox::new("paced");
    let mut terminal = in_a_terminal(&sandbox, "{idem} --no-pager lesson 4 --no-ask");
    terminal.env("LINES", "30").env("COLUMNS", "80");
    let out = fed(&mut terminal, &[b'\n'; 200]);
    // The terminal echoes the keys as they are typed, all before idem's
    // first line.
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let text = text.trim_start_matches('\n');
    assert!(out.status.success(), "{text}");
    let screens: Vec<&str> = text.split("(Enter to go on)").collect();
    assert!(screens.len() > 3, "it paused: {text}");
    for screen in &screens {
        let rows: usize = screen
            .lines()
            .map(|l| l.chars().count().div_ceil(80).max(1))
            .sum();
        assert!(rows <= 30, "{rows} rows between two pauses:\n{screen}");
    }
}
