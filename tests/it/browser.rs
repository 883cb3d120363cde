//! `--timeline FILE.html` opened in a real headless browser (Debian's
//! chromium): the lanes, bars and lock-wait arrows are in its DOM, and a
//! screenshot of the page is not blank. `--trace-json` is checked as the
//! Chrome Trace Event format it claims to be.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
use crate::common::Sandbox;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(|name| {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .ok()?;
            let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
            (found.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
        })
}

/// Runs headless chromium on the page with `args`, with the flags a
/// closed-network machine needs, in a profile of its own.
fn headless(browser: &Path, sandbox: &Sandbox, page: &Path, args: &[&str]) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1300,500",
        ])
        .arg(format!(
            "--user-data-dir={}",
            sandbox.dir.join("profile").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

#[test]
fn the_timeline_page_opens_in_a_browser_with_its_lanes_bars_and_arrows() {
    let Some(browser) = chromium() else {
        common::runnable(
            "the_timeline_page_opens_in_a_browser",
            false,
            "chromium (Debian: chromium)",
        );
        return;
    };
    let sandbox = Sandbox::new("browser");
    let page = sandbox.dir.join("race.html");
    let trace = sandbox.dir.join("race.json");
    let out = sandbox
        .idem()
        .args([
            "race",
            "-s",
            "claim-work-complete",
            "--loser",
            "block",
            "--json",
        ])
        .arg("--timeline")
        .arg(&page)
        .arg("--trace-json")
        .arg(&trace)
        .assert()
        .success();
    let out = out.get_output();
    let race: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = race["reports"].as_array().unwrap();
    let steps: usize = reports
        .iter()
        .map(|w| w["steps"].as_array().unwrap().len())
        .sum();
    let waits: usize = reports
        .iter()
        .map(|w| w["blocked_by"].as_array().unwrap().len())
        .sum();
    assert!(waits >= 1, "blocking losers waited on the winner's lock");

    // The page, as the browser built it.
    let dom = headless(&browser, &sandbox, &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(
        dom.matches(r#"class="lane""#).count(),
        5,
        "one lane per worker"
    );
    assert_eq!(
        dom.matches(r#"class="step""#).count(),
        steps,
        "one bar per step"
    );
    assert!(dom.contains(r#"data-step="claim""#) && dom.contains(r#"data-step="work""#));
    assert!(
        dom.contains("INSERT INTO idempotency_keys"),
        "bars carry their SQL"
    );
    assert_eq!(
        dom.matches(r#"class="wait""#).count(),
        waits,
        "an arrow per lock wait"
    );
    for w in reports {
        let lane = format!(
            r#"data-worker="{}" data-outcome="{}""#,
            w["worker"],
            w["outcome"].as_str().unwrap()
        );
        assert!(dom.contains(&lane), "{lane}");
    }
    // Self-contained: no script, nothing to fetch.
    assert!(!dom.contains("<script"), "no script");
    assert!(
        !dom.contains(" src=") && !dom.contains(" href="),
        "nothing fetched"
    );

    screenshot_is_drawn(&browser, &sandbox, &page);
    trace_has_every_step(&trace, steps, waits);
}

/// What the page looks like: a screenshot that is not one flat colour.
fn screenshot_is_drawn(browser: &std::path::Path, sandbox: &Sandbox, page: &std::path::Path) {
    let shot = sandbox.dir.join("race.png");
    let taken = headless(
        browser,
        sandbox,
        page,
        &[&format!("--screenshot={}", shot.display())],
    );
    assert!(shot.exists(), "{}", String::from_utf8_lossy(&taken.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let channels = info.color_type.samples();
    let inked = pixels[..info.buffer_size()]
        .chunks(channels)
        .filter(|p| p[..3].iter().any(|c| *c < 200))
        .count();
    let total = (info.width * info.height) as usize;
    assert!(
        inked * 50 > total,
        "at least 2% of the page is drawn: {inked} of {total} pixels"
    );
}

/// The Chrome Trace Event file: a complete event per step, a named thread
/// per worker, a flow (start and finish) per lock wait.
fn trace_has_every_step(trace: &std::path::Path, steps: usize, waits: usize) {
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!(count("X"), steps);
    assert_eq!(
        events.iter().filter(|e| e["name"] == "thread_name").count(),
        5
    );
    assert_eq!(count("s"), waits);
    assert_eq!(count("f"), waits);
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert!(e["ts"].as_i64().is_some() && e["dur"].as_i64().is_some_and(|d| d >= 1));
    }
}
