//! docs/ci.md as printed: its shell script starts the course's app, probes it from the plan the app writes, and leaves a JUnit file; its example plan is the one in `examples/`.

use std::process::Command;
use std::time::Duration;

use crate::common::{Sandbox, processes_mentioning};

/// The fenced block right after `marker` in `page`.
fn block_after<'a>(page: &'a str, marker: &str) -> &'a str {
    let from = page.find(marker).expect("the marker") + marker.len();
    let rest = &page[from..];
    let start = rest.find("```").expect("a fence");
    let body = &rest[start..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    &body[..body.find("\n```").expect("a closing fence") + 1]
}

#[test]
fn the_ci_pages_script_runs_as_printed_and_the_guard_holds() {
    let page = std::fs::read_to_string("docs/ci.md").unwrap();
    let script = block_after(&page, "<!-- ci-script -->");
    let sandbox = Sandbox::new("ci-script");
    let work = sandbox.dir.join("ci");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("probe.sh"), script).unwrap();
    let port = crate::common::free_port();
    let idem = assert_cmd::cargo::cargo_bin("idem");
    let path = format!(
        "{}:{}",
        idem.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("probe.sh")
        .current_dir(&work)
        .env("PATH", path)
        .env("PORT", port.to_string())
        .env("TMPDIR", &sandbox.dir)
        .env("XDG_STATE_HOME", sandbox.state())
        .env("NO_COLOR", "1")
        .env("GITHUB_STEP_SUMMARY", work.join("summary.md"))
        .env("GITHUB_ACTIONS", "true")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("the plan"), "{stdout}");
    let xml = std::fs::read_to_string(work.join("probe-junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("failures"), Some("0"), "{xml}");
    assert!(suite.attribute("tests").unwrap().parse::<u32>().unwrap() > 1);
    let summary = std::fs::read_to_string(work.join("summary.md")).unwrap();
    assert!(summary.contains("| award XP (guard) |"), "{summary}");
    // The script's trap stopped the app: no process of it is left.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(&sandbox.dir).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(processes_mentioning(&sandbox.dir), Vec::<String>::new());
}

#[test]
fn the_example_plan_is_the_pages_plan() {
    let page = std::fs::read_to_string("docs/ci.md").unwrap();
    let plan = block_after(&page, "## A plan");
    let example = std::fs::read_to_string("examples/probe-plan.toml").unwrap();
    assert!(
        example.ends_with(plan),
        "examples/probe-plan.toml drifted from docs/ci.md"
    );
}
