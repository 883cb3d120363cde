//! The probe's exit-code contract, each status reached on purpose here or beside the case that reaches it: 0 held (http.rs), 1 failed (http.rs), 2 a wrong command line, 3 not judged (no_race.rs, helper_connections.rs), 4 could not run.

use crate::common::Sandbox;

fn probe(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let out = sandbox.idem().arg("probe").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn each_way_a_probe_can_end_has_its_own_status() {
    let sandbox = Sandbox::new("probe-status");
    let nobody = "http://127.0.0.1:1/lessons/1/complete";
    // 2: the command line is wrong.
    let (code, err) = probe(&sandbox, &[nobody, "--count-sql", "SELECT 1"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // 4: nothing answers at all.
    let (code, err) = probe(&sandbox, &[nobody, "-d", "{}", "--timeout-ms", "5000"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no request got an answer"), "{err}");
    // 4: the count cannot be taken before the first request.
    let (code, err) = probe(
        &sandbox,
        &[
            nobody,
            "--count-sql",
            "SELECT 1",
            "--count-database-url",
            "postgres://nobody@127.0.0.1:1/none",
        ],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The contract is in --help.
    let help = sandbox.idem().args(["probe", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit status: 0 every case held; 1 a case failed"),
        "{help}"
    );
}

/// `--count-cmd`: effects counted by any command, here psql on the app's
/// database. Check-then-store's duplicates are found as with --count-sql,
/// and a command that fails, hangs or talks too much is refused before the
/// first request (status 4), its stderr escaped, a hung one killed.
#[test]
fn a_count_command_counts_effects_anywhere_and_is_bounded() {
    let app = crate::common::app::Served::start("count-cmd", &["-s", "check-then-store"]);
    let psql = format!(
        "psql '{}' -Atc '{}'",
        app.field("database_url"),
        app.field("count_sql")
    );
    let award = r#"{"user_id": 42, "amount": 10}"#;
    let out = app
        .sandbox
        .idem()
        .args(["probe", &app.endpoint(), "-d", award, "--count-cmd", &psql])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("duplicate"), "{stdout}");
    let marker = format!("sleep 3{}", std::process::id() % 1000);
    for (cmd, said) in [
        (
            "echo 'boom \x1b[31m' >&2; exit 3",
            "failed (exit status: 3): boom \\x1b[31m",
        ),
        (marker.as_str(), "did not finish within 300 ms"),
        ("yes 1 | head -c 10000", "wrote more than 4096 bytes"),
        ("echo lots", "printed \"lots\", not one whole number"),
    ] {
        let began = std::time::Instant::now();
        let out = app
            .sandbox
            .idem()
            .args(["probe", &app.endpoint(), "-d", award, "--count-cmd", cmd])
            .args(["--count-timeout-ms", "300"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{cmd}: {err}");
        assert!(err.contains(said), "{cmd}: {err}");
        assert!(!err.contains('\x1b'), "escaped: {err}");
        assert!(began.elapsed() < std::time::Duration::from_secs(10));
    }
    // The whole probe's bound drops the count mid-run: its command goes too.
    let dropped = format!("sleep 4{}", std::process::id() % 1000);
    let out = app
        .sandbox
        .idem()
        .args([
            "probe",
            &app.endpoint(),
            "-d",
            award,
            "--count-cmd",
            &dropped,
        ])
        .args(["--timeout-ms", "800", "--count-timeout-ms", "60000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // SIGKILL takes a moment to end a process after idem sent it and exited.
    let left = || {
        crate::common::processes()
            .into_iter()
            .filter(|p| p.cmdline.contains(&marker) || p.cmdline.contains(&dropped))
            .map(|p| format!("{}: {}", p.pid, p.cmdline))
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !left().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the hung commands were not killed: {:?}",
            left()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `--wait-for-ms` waits for a service that is still starting, says how
/// long it took, and ends with 4 when it never came up.
#[test]
fn wait_for_ms_waits_for_a_late_service_and_gives_up_on_an_absent_one() {
    let sandbox = Sandbox::new("probe-wait");
    let nobody = "http://127.0.0.1:1/pay";
    let (code, err) = probe(&sandbox, &[nobody, "-d", "{}", "--wait-for-ms", "300"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("did not answer within --wait-for-ms 300"),
        "{err}"
    );
    let port = crate::common::free_port();
    let dir = sandbox.dir.clone();
    let late = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        crate::common::flawed::start_at(
            crate::common::flawed::Flaw::None,
            &dir,
            &format!("127.0.0.1:{port}"),
        )
    });
    let url = format!("http://127.0.0.1:{port}/pay");
    let (code, err) = probe(&sandbox, &[&url, "-d", "{}", "--wait-for-ms", "10000"]);
    late.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    let waited: u64 = err
        .split("answered after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("how long it waited: {err}"));
    assert!(waited >= 300, "it waited for the late service: {err}");
}

/// A report target idem would not write is a wrong command line (2) for a
/// plan as for a single probe, whether JUnit's path or the
/// `GITHUB_STEP_SUMMARY` GitHub's report appends to: a directory, a link,
/// a FIFO, a device.
#[test]
fn a_report_target_idem_would_not_write_is_refused_with_2() {
    let sandbox = Sandbox::new("probe-report-targets");
    let dir = &sandbox.dir;
    let fifo = dir.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("link")).unwrap();
    std::fs::write(
        dir.join("plan.toml"),
        "[[endpoint]]\nurl = \"http://127.0.0.1:1/pay\"\n",
    )
    .unwrap();
    let targets = [
        dir.clone(),
        dir.join("link"),
        fifo,
        std::path::PathBuf::from("/dev/null"),
    ];
    for target in &targets {
        for plan in [true, false] {
            let mut junit = sandbox.idem();
            junit.arg("probe");
            match plan {
                true => junit.args(["--plan", "plan.toml"]),
                false => junit.args(["http://127.0.0.1:1/pay", "-d", "{}"]),
            };
            let out = junit
                .arg("--report")
                .arg(format!("junit:{}", target.display()))
                .current_dir(dir)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{target:?}, plan {plan}: {stderr}"
            );
            let github = sandbox
                .idem()
                .arg("probe")
                .args(match plan {
                    true => ["--plan", "plan.toml"],
                    false => ["http://127.0.0.1:1/pay", "--report=github"],
                })
                .args(["--report", "github"])
                .env("GITHUB_STEP_SUMMARY", target)
                .current_dir(dir)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&github.stderr);
            assert_eq!(
                github.status.code(),
                Some(2),
                "{target:?}, plan {plan}: {stderr}"
            );
            assert!(stderr.contains("GITHUB_STEP_SUMMARY"), "{stderr}");
        }
    }
    assert!(!dir.join("elsewhere").exists(), "nothing through the link");
}

/// A report that cannot be written once the probe ran (the file-size limit
/// stands in for a full disk) exits 4, never the 0 of a probe that held
/// nor the 1 of one that failed: CI must not pass without its report.
#[test]
fn a_report_that_cannot_be_written_exits_4() {
    use std::os::unix::process::CommandExt;
    let app = crate::common::app::Served::start("report-full", &["-s", "claim-work-complete"]);
    let sandbox = Sandbox::new("probe-report-full");
    let junit = sandbox.dir.join("junit.xml");
    let mut probe = sandbox.idem_std();
    probe
        .args([
            "probe",
            &app.endpoint(),
            "-d",
            r#"{"user_id": 42, "amount": 10}"#,
        ])
        .args(app.count_args())
        .arg("--report")
        .arg(format!("junit:{}", junit.display()));
    // SAFETY: between fork and exec, only setrlimit and signal, both
    // async-signal-safe: a write past 64 bytes then fails with EFBIG.
    unsafe {
        probe.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            match libc::setrlimit(libc::RLIMIT_FSIZE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = probe.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("held"), "the probe held: {stdout}");
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(stderr.contains("report was not written"), "{stderr}");
}

/// `idem explore` exits 1 when the guard failed, so a command line it
/// cannot run exits 2: workers it does not walk, and `--http`. Its help
/// says the two workers it walks unless told.
#[test]
fn explore_refuses_what_it_cannot_walk_with_2() {
    let sandbox = Sandbox::new("explore-status");
    for args in [
        vec!["--workers", "1"],
        vec!["--workers", "10"],
        vec!["--workers", "50"],
        vec!["--workers", "500"],
        vec!["--http"],
    ] {
        let out = sandbox.idem().arg("explore").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("idem explore"), "{stderr}");
    }
    let help = sandbox.idem().args(["explore", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    assert!(help.contains("[default: 2]"), "{help}");
    // A worker a stepped race does not have is named against its own count.
    let out = sandbox
        .idem()
        .args(["step", "--workers", "2", "--schedule", "crash0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("numbered 1 to 2"), "{stderr}");
}
