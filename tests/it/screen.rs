//! Every command fits an 80-column screen: each one rendered with
//! `COLUMNS=80`, no line wider, except a line that is one unbreakable word
//! (a URL), which wrapping could only cut.

use crate::common;
use crate::common::Sandbox;

const WIDTH: usize = 80;

/// The lines of `text` wider than the screen, colour codes aside.
fn too_wide(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let shown = strip(l);
            shown.chars().count() > WIDTH && shown.trim().contains(' ')
        })
        .map(str::to_string)
        .collect()
}

fn strip(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Each command's output at 80 columns, in four tests so that each stays
/// under a minute: the races, the teaching commands, the longest lessons,
/// and the rest (machine output, such as `idem man`'s roff, is left out).
#[test]
fn every_race_fits_80_columns() {
    fits_80_columns(
        "screen-races",
        &[
            &["race"],
            &["race", "--trace"],
            &["race", "--http", "--trace"],
            &["race", "--runs", "20"],
            &[
                "race",
                "-s",
                "claim-work-complete",
                "--amounts",
                "10,20,10,30,10",
                "--no-fingerprint",
                "--loser",
                "poll",
            ],
            &[
                "race",
                "-s",
                "claim-work-complete",
                "--loser",
                "block",
                "--trace",
            ],
            &[
                "race",
                "-s",
                "guard",
                "--crash",
                "after-claim",
                "--pool-size",
                "6",
                "--trace",
            ],
            &[
                "race",
                "-s",
                "claim-work-complete",
                "--store",
                "cache",
                "--audit",
            ],
            &["race", "--http", "--replicas", "2", "--workers", "10"],
            &["race", "-s", "memory"],
            &[
                "race",
                "-s",
                "advisory-lock",
                "--isolation",
                "repeatable-read",
            ],
            &["race", "--isolation", "serializable", "--trace"],
        ],
    );
}

#[test]
fn every_teaching_command_fits_80_columns() {
    fits_80_columns(
        "screen-teaching",
        &[
            &["stores", "--runs", "3"],
            &["keys"],
            &["keys", "--compare"],
            &["step", "--workers", "2", "--schedule", "1,2,1,2"],
            &["lessons"],
            &["lesson", "1", "--no-pause"],
            &["lesson", "3", "--no-pause"],
            &["lesson", "5", "--no-pause"],
            &["lesson", "7", "--no-pause"],
            &["challenge"],
            &["scenario", "list"],
            // One scenario of each kind: a race, lesson 6's clients, the
            // pooler, a failover (all of them run in tests/it/teaching.rs).
            &[
                "scenario",
                "run",
                "scenarios/1-check-then-store.toml",
                "scenarios/6-random-keys.toml",
                "scenarios/3-pgbouncer-setting-leaks.toml",
                "scenarios/10-async-failover-loses-the-key.toml",
            ],
        ],
    );
}

#[test]
fn every_other_command_fits_80_columns() {
    fits_80_columns(
        "screen-others",
        &[
            &["compare"],
            &["compare", "--losers"],
            &["matrix", "--runs", "1"],
            &["pooler"],
            &["doctor"],
            &["race", "--help"],
            &["probe", "--help"],
            &["serve", "--help"],
            &["race", "--standby", "--failover", "after-complete"],
            &[
                "race",
                "-s",
                "check-then-store",
                "--standby",
                "--read-from",
                "standby",
                "--replica-delay-ms",
                "200",
            ],
            &["compare", "--standby", "--read-from", "standby"],
            &[
                "matrix",
                "--runs",
                "1",
                "--standby",
                "--read-from",
                "standby",
            ],
        ],
    );
}

/// The two lessons that run the most demonstrations, on their own.
#[test]
fn the_longest_lessons_fit_80_columns() {
    fits_80_columns(
        "screen-long-lessons",
        &[
            &["lesson", "8", "--no-pause"],
            &["lesson", "10", "--no-pause"],
        ],
    );
}

/// Runs each command at 80 columns and checks no line of its output is wider.
fn fits_80_columns(name: &str, commands: &[&[&str]]) {
    let sandbox = Sandbox::new(name);
    for args in commands {
        let out = sandbox
            .idem()
            .env("COLUMNS", WIDTH.to_string())
            .args(*args)
            .assert()
            .success();
        let out = out.get_output();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.trim().is_empty(), "{args:?} printed nothing");
        let wide = too_wide(&text);
        assert!(
            wide.is_empty(),
            "{args:?} is wider than {WIDTH} columns:\n{}",
            wide.join("\n")
        );
    }
}

/// `idem serve`'s ready lines and `idem probe`'s report, at 80 columns.
#[test]
fn serve_and_probe_fit_80_columns() {
    let sandbox = Sandbox::new("screen-serve");
    let mut child = sandbox
        .idem_std()
        .env("COLUMNS", WIDTH.to_string())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    {
        use std::io::{BufRead, BufReader};
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        // The ready text ends with a blank line after the probe command.
        let mut blank = 0;
        while blank < 2 {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                blank += 1;
            }
            lines.push(line.trim_end().to_string());
        }
        std::thread::spawn(move || reader.lines().for_each(drop));
    }
    let ready = lines.join("\n");
    common::signal(child.id(), libc::SIGINT);
    child.wait().unwrap();
    let wide = too_wide(&ready);
    assert!(wide.is_empty(), "serve:\n{}", wide.join("\n"));

    let app = common::app::Served::start("screen-probe", &["-s", "guard"]);
    let out = app
        .sandbox
        .idem()
        .env("COLUMNS", WIDTH.to_string())
        .args([
            "probe",
            &app.endpoint(),
            "--conformance",
            "-d",
            r#"{"user_id": 1, "amount": 10}"#,
        ])
        .args(app.count_args())
        .output()
        .unwrap();
    // What this test reads is the width. One conformance case judges
    // time (keys sent in parallel must not answer in a staircase), and on
    // a machine busy with the rest of the suite it can judge a staircase
    // (seen once in CI: 31, 31, 32, 67, 132 ms); that verdict, and only
    // that one, is not this test's failure.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let timing_only = out.status.code() == Some(1)
        && stderr.contains("1 of 14 cases did not hold; the first, distinct keys in parallel");
    assert!(out.status.success() || timing_only, "probe: {stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let wide = too_wide(&text);
    assert!(wide.is_empty(), "probe:\n{}", wide.join("\n"));
}
