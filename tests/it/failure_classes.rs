//! The probe's failure classes of 2026, each judged against an API of the tests' own that has the flaw, and one that has none.

use idem::probe::cases::names;
use serde_json::Value;

use crate::common::Sandbox;
use crate::common::flawed::{self, Flaw};

const CASES: [&str; 5] = [
    names::TWO_KEY_HEADERS,
    names::REPLAY_MARKER,
    names::ANOTHER_QUERY,
    names::ANOTHER_ENDPOINT,
    names::DISTINCT_KEYS,
];

#[test]
fn each_flaw_fails_its_own_case_and_a_sound_api_holds_all_four() {
    let sandbox = Sandbox::new("failure-classes");
    let apis = [
        (Flaw::None, None),
        (Flaw::FirstKeyLine, Some(names::TWO_KEY_HEADERS)),
        (Flaw::TrustsMarker, Some(names::REPLAY_MARKER)),
        (Flaw::IgnoresQuery, Some(names::ANOTHER_QUERY)),
        (Flaw::KeyNotScoped, Some(names::ANOTHER_ENDPOINT)),
        (Flaw::OneLock, Some(names::DISTINCT_KEYS)),
    ];
    for (flaw, fails) in apis {
        let (url, count) = flawed::start(flaw, &sandbox.dir);
        let out = sandbox
            .idem()
            .args(["probe", &format!("{url}/pay"), "-d", r#"{"amount": 10}"#])
            .args(["--count-cmd", &format!("cat {}", count.display())])
            .args(["--conformance", "--json", "--settle-ms", "2000"])
            .args(["--other-url", &format!("{url}/refund")])
            .output()
            .unwrap();
        let marks: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| {
                Some((
                    v["case"].as_str()?.to_owned(),
                    v["mark"].as_str()?.to_owned(),
                ))
            })
            .filter(|(case, _)| CASES.contains(&case.as_str()))
            .collect();
        let expected: Vec<(String, String)> = CASES
            .iter()
            .map(|c| {
                let mark = if Some(*c) == fails { "fail" } else { "pass" };
                (c.to_string(), mark.to_string())
            })
            .collect();
        assert_eq!(
            marks,
            expected,
            "{flaw:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A failed case is a failed probe, whatever the draft's cases say,
        // and names the key it was sent with (to find it in the API's logs).
        if let Some(failed) = fails {
            assert_eq!(out.status.code(), Some(1), "{flaw:?}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let saw = stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["case"] == failed)
                .and_then(|v| v["saw"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let key_base = stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find_map(|v| v["key"].as_str().map(str::to_owned))
                .expect("the burst's key");
            assert!(saw.contains(&key_base), "{flaw:?}: {saw}");
        }
    }
}

/// `--sink`: idem plays the service the API calls for its effect, and
/// counts the calls. An API whose rows look right (one effect in its own
/// count) but that calls the service before it claims the key is caught:
/// five calls for one key; one that claims first makes one call.
#[test]
fn the_sink_counts_the_calls_a_guard_makes_before_its_claim() {
    let sandbox = Sandbox::new("sink");
    for (flaw, code, calls) in [(Flaw::CallsBeforeClaim, 1, 5), (Flaw::None, 0, 1)] {
        let (url, sink) = api_with_sink(flaw, &sandbox);
        let out = probe_with_sink(&sandbox, &url, &sink);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{flaw:?}: {stdout}");
        let burst = crate::common::burst_line(&stdout);
        assert_eq!(burst["counted_by"], "sink", "{stdout}");
        assert_eq!(burst["effects"]["effects"], calls, "{flaw:?}: {stdout}");
    }
}

/// The profile's "after a failed effect", observed with `--sink`: the
/// sink fails one call, and the retry with the same key either gets the
/// stored failure back (as Stripe documents) or is performed again (as an
/// API that lets the key go does). Observed, never judged.
#[test]
fn the_profile_says_what_a_retry_after_a_failed_effect_gets() {
    let sandbox = Sandbox::new("failed-effect");
    let apis = [
        (Flaw::None, "the stored failure replayed", "matches"),
        (
            Flaw::ReleasesOnFailure,
            "performed again on retry",
            "differs",
        ),
    ];
    for (flaw, observed, stripe) in apis {
        let (url, sink) = api_with_sink(flaw, &sandbox);
        let out = sandbox
            .idem()
            .args(["probe", &format!("{url}/pay"), "-d", r#"{"amount": 10}"#])
            .args([
                "--sink",
                &sink,
                "--conformance",
                "--json",
                "--settle-ms",
                "2000",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let profile: Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("profile").is_some())
            .expect("the profile's line");
        let point = profile["profile"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["point"] == "after a failed effect")
            .expect("the point");
        assert_eq!(point["observed"], observed, "{flaw:?}: {point}");
        assert_eq!(point["stripe"], stripe, "{flaw:?}: {point}");
    }
}

/// An API with `flaw` whose work calls a sink at a free port: its URL and
/// the sink's address, for `idem probe --sink`.
fn api_with_sink(flaw: Flaw, sandbox: &Sandbox) -> (String, String) {
    let sink = format!("127.0.0.1:{}", crate::common::free_port());
    let (url, _) = flawed::start_calling(flaw, &sandbox.dir, &sink);
    (url, sink)
}

/// Calls to the sink that carry none of the probe's keys (a stray local
/// client calling it all through the probe) are not the probe's: an API
/// that makes no call is not judged "held" on them, one that makes one
/// call holds, and the verdict says how many others came.
#[test]
fn the_sink_counts_only_the_probes_keys_and_says_what_else_came() {
    let sandbox = Sandbox::new("sink-strays");
    let sink = format!("127.0.0.1:{}", crate::common::free_port());
    let (calling, _) = flawed::start_calling(Flaw::None, &sandbox.dir, &sink);
    let (silent, _) = flawed::start(Flaw::None, &sandbox.dir);
    for (url, code, effects) in [(silent, 3, 0), (calling, 0, 1)] {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stray = {
            let (done, sink) = (done.clone(), sink.clone());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) && sent < 2000 {
                    if let Ok(mut s) = std::net::TcpStream::connect(&sink) {
                        use std::io::{Read, Write};
                        let _ = s.write_all(
                            b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        );
                        let _ = s.read_to_end(&mut Vec::new());
                        sent += 1;
                    }
                }
                sent
            })
        };
        let out = probe_with_sink(&sandbox, &url, &sink);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let sent = stray.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(sent > 0, "the stray client reached the sink");
        assert_eq!(out.status.code(), Some(code), "{stdout}");
        let burst = crate::common::burst_line(&stdout);
        assert_eq!(burst["effects"]["effects"], effects, "{stdout}");
        let summary = burst["verdict"]["summary"].as_str().unwrap();
        assert!(
            summary.contains("carrying none of the probe's keys, not counted"),
            "{summary}"
        );
    }
}

/// `idem probe URL/pay --sink SINK --json`, its output.
fn probe_with_sink(sandbox: &Sandbox, url: &str, sink: &str) -> std::process::Output {
    sandbox
        .idem()
        .args(["probe", &format!("{url}/pay"), "-d", r#"{"amount": 10}"#])
        .args(["--sink", sink, "--json"])
        .output()
        .unwrap()
}
