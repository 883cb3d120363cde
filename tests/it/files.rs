//! Every file idem reads or writes goes through files/: a planted link is never written through, a FIFO or a device never waited on or read without end, and the progress lives where the XDG rules say.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{self, Sandbox};

/// A writer: the command line (in a sandbox, writing into `dir`) and the
/// file it writes there.
struct Writer {
    args: Vec<String>,
    target: PathBuf,
}

fn writers(dir: &Path, state: &Path) -> Vec<Writer> {
    let d = dir.display().to_string();
    let progress = state.join("idem").join("progress.toml");
    std::fs::create_dir_all(progress.parent().unwrap()).unwrap();
    vec![
        Writer {
            args: vec!["man".into(), "--dir".into(), d.clone()],
            target: dir.join("idem.1"),
        },
        Writer {
            args: vec![
                "completions".into(),
                "bash".into(),
                "--dir".into(),
                d.clone(),
            ],
            target: dir.join("idem.bash"),
        },
        Writer {
            args: vec!["exercise".into(), "1".into(), "--dir".into(), d],
            target: dir.join("1-two-orders.toml"),
        },
        // `idem hint` saves the hints seen to the progress file.
        Writer {
            args: vec!["hint".into(), "1".into()],
            target: progress,
        },
    ]
}

/// Runs `args` in the sandbox with `state` as XDG_STATE_HOME; returns its
/// exit code and stderr, or panics if it has not ended within 5 s.
fn run(sandbox: &Sandbox, state: &Path, args: &[String]) -> (Option<i32>, String) {
    let mut child = sandbox
        .idem_std()
        .args(args)
        .env("XDG_STATE_HOME", state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("idem {args:?} still runs after 5 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// At every name a writer writes, a link to a file of the user's, a
/// dangling link and a FIFO: each run ends at once with its refusal on
/// one line, and the file, the link's target and the FIFO are untouched.
#[test]
fn no_writer_follows_a_planted_link_or_waits_on_a_fifo() {
    let sandbox = Sandbox::new("writers-planted");
    let dir = sandbox.dir.join("out");
    let state = sandbox.dir.join("state");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = sandbox.dir.join("secret");
    let elsewhere = sandbox.dir.join("never-made");
    for w in writers(&dir, &state) {
        let name = w.target.display();
        for planted in ["link", "dangling", "fifo"] {
            std::fs::write(&secret, "the user's own").unwrap();
            let _ = std::fs::remove_file(&w.target);
            match planted {
                "link" => std::os::unix::fs::symlink(&secret, &w.target).unwrap(),
                "dangling" => std::os::unix::fs::symlink(&elsewhere, &w.target).unwrap(),
                _ => mkfifo(&w.target),
            }
            let began = Instant::now();
            let (code, stderr) = run(&sandbox, &state, &w.args);
            assert!(
                began.elapsed() < Duration::from_secs(2),
                "{name} ({planted}): {:?}",
                began.elapsed()
            );
            let refusal: Vec<&str> = stderr
                .lines()
                .filter(|l| l.contains("error") || l.contains("not saved"))
                .collect();
            assert_eq!(refusal.len(), 1, "{name} ({planted}): {stderr}");
            assert!(
                refusal[0].contains("link")
                    || refusal[0].contains("not a regular file")
                    || refusal[0].contains("there already"),
                "{name} ({planted}): {stderr}"
            );
            // `idem hint` still shows the hint: only the save is refused.
            if !w.args[0].starts_with("hint") {
                assert_ne!(code, Some(0), "{name} ({planted})");
            }
            assert_eq!(std::fs::read_to_string(&secret).unwrap(), "the user's own");
            assert!(
                !elsewhere.exists(),
                "{name} ({planted}): a link's target was made"
            );
            let kind = std::fs::symlink_metadata(&w.target).unwrap().file_type();
            match planted {
                "fifo" => assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind)),
                _ => assert!(kind.is_symlink(), "{name} ({planted})"),
            }
        }
        std::fs::remove_file(&w.target).unwrap();
    }
}

/// The progress goes where the XDG base directory specification says: a
/// relative XDG_STATE_HOME is ignored (not used as a folder of the current
/// one), and a HOME that does not exist is never made.
#[test]
fn the_progress_follows_the_xdg_rules() {
    let sandbox = Sandbox::new("writers-xdg");
    let home = sandbox.dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cwd = sandbox.dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = sandbox
        .idem()
        .args(["hint", "1"])
        .env("XDG_STATE_HOME", "relative/state")
        .env("HOME", &home)
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        !cwd.join("relative").exists(),
        "a relative XDG_STATE_HOME is ignored"
    );
    let kept = home.join(".local/state/idem/progress.toml");
    assert!(kept.is_file(), "kept under HOME instead");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(kept.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the state directory is private: {mode:o}");

    let missing = sandbox.dir.join("no-such-home");
    let out = sandbox
        .idem()
        .args(["hint", "1"])
        .env_remove("XDG_STATE_HOME")
        .env("HOME", &missing)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!missing.exists(), "a HOME that does not exist is not made");
}

/// A progress file that names a lesson idem does not have (0, 11, 255, or
/// a hint key that is no number) is not idem's: refused in one line, left
/// as it is.
#[test]
fn a_progress_file_naming_a_lesson_that_does_not_exist_is_left_alone() {
    let sandbox = Sandbox::new("writers-lessons");
    let state = sandbox.state();
    let file = state.join("idem").join("progress.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for text in [
        "lessons_read = [0]\n",
        "lessons_read = [1, 12]\n",
        "exercises_passed = [255]\n",
        "[hints_seen]\nx = 1\n",
    ] {
        std::fs::write(&file, text).unwrap();
        let line = crate::common::refused_in_one_line(sandbox.idem().arg("progress"));
        assert!(line.contains("is not idem's progress"), "{text}: {line}");
        assert!(line.contains("lessons go from 1 to 11"), "{text}: {line}");
        let (_, stderr) = run(&sandbox, &state, &["hint".into(), "2".into()]);
        assert!(stderr.contains("progress not saved"), "{text}: {stderr}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}

#[test]
fn a_timeline_is_never_written_through_a_link_or_into_a_fifo() {
    let sandbox = Sandbox::new("timeline-target");
    let dir = tempdir("timeline-target");
    let secret = dir.join("secret");
    std::fs::write(&secret, "keep me").unwrap();
    let planted = dir.join("report.html");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let fifo = dir.join("pipe.html");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string and mode.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
    for (flag, target, said) in [
        ("--timeline", &planted, "is a symbolic link"),
        ("--trace-json", &planted, "is a symbolic link"),
        ("--timeline", &fifo, "is not a regular file"),
    ] {
        let started = Instant::now();
        let out = sandbox
            .idem()
            .args(["race", flag])
            .arg(target)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(said),
            "{flag} {}: {stderr}",
            target.display()
        );
        assert_eq!(stderr.lines().count(), 1);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep me");
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());

    // A regular file is replaced whole, and the output says where it went.
    let page = dir.join("page.html");
    std::fs::write(&page, "old").unwrap();
    let out = sandbox
        .idem()
        .args(["race", "--timeline"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("--timeline: wrote {}", page.display())),
        "{stdout}"
    );
    let written = std::fs::read_to_string(&page).unwrap();
    assert!(written.starts_with("<!doctype html>") || written.starts_with("<!DOCTYPE html>"));
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        names.len(),
        4,
        "secret, link, fifo, page and nothing staged: {names:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A directory of this test's own for files it plants.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("idem-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The report: a FIFO as a scenario file, `--data @`, `--cacert` or
/// `--tls-cert` blocked idem (and Ctrl-C with it), and `/dev/zero` was read
/// until the allocator gave up. Each is refused in one line, at once.
#[test]
fn a_fifo_or_a_device_for_any_file_flag_is_refused_in_one_line_at_once() {
    let sandbox = Sandbox::new("not-regular");
    let fifo = sandbox.dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap().to_string();
    let at_fifo = format!("@{fifo}");
    for (path, said) in [(fifo.as_str(), "a FIFO"), ("/dev/zero", "a device")] {
        let at = if path == fifo {
            at_fifo.clone()
        } else {
            "@/dev/zero".into()
        };
        let commands: [Vec<&str>; 5] = [
            vec!["scenario", "run", path],
            vec!["probe", "http://127.0.0.1:9/x", "--data", &at],
            vec!["probe", "https://127.0.0.1:9/x", "--cacert", path],
            vec!["serve", "--tls-cert", path, "--tls-key", path],
            vec![
                "challenge",
                "--url",
                "https://127.0.0.1:9",
                "--count-sql",
                "SELECT 1",
                "--count-database-url",
                "postgresql:///x?host=/nonexistent",
                "--cacert",
                path,
            ],
        ];
        for args in commands {
            let started = Instant::now();
            // A wrong command line is 2 where 1 is a verdict: the probe's
            // and a scenario run's.
            let code = if ["probe", "scenario"].contains(&args[0]) {
                2
            } else {
                1
            };
            let stderr = common::refused_in_one_line_with(
                sandbox.idem().args(&args).timeout(Duration::from_secs(10)),
                code,
            );
            assert!(
                stderr.contains(said) && stderr.contains("not a regular file"),
                "{args:?}: {stderr}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{args:?} took {:?}",
                started.elapsed()
            );
        }
    }
    std::fs::remove_file(&fifo).unwrap();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(5)),
        Vec::<String>::new()
    );
}

/// The report: `--timeline` wrote through a directory on its way
/// that another user had made a link, and a valid 245-byte name failed
/// after the race because the staged copy's name was too long.
#[test]
fn a_timeline_is_not_written_through_another_users_linked_directory_and_a_long_name_is_fine() {
    let sandbox = Sandbox::new("timeline-dir");
    let dir = tempdir("timeline-dir");
    let real = dir.join("real");
    std::fs::create_dir(&real).unwrap();
    let linked = dir.join("linked");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    if common::is_root() {
        // The link is someone else's: the postgres user's, as a stranger's would be.
        let c = std::ffi::CString::new(linked.to_str().unwrap()).unwrap();
        let pw = unsafe { libc::getpwnam(c"postgres".as_ptr()) };
        assert!(!pw.is_null(), "the postgres user exists");
        let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), uid, gid) }, 0);
        let stderr = common::refused_in_one_line(
            sandbox
                .idem()
                .args(["race", "--timeline"])
                .arg(linked.join("page.html")),
        );
        assert!(
            stderr.contains("symbolic link of another user's"),
            "{stderr}"
        );
        assert!(!real.join("page.html").exists());
    }
    let long = real.join(format!("{}.html", "t".repeat(240)));
    crate::common::succeeded(sandbox.idem().args(["race", "--timeline"]).arg(&long));
    assert!(long.exists());
    let names: Vec<_> = std::fs::read_dir(&real).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "nothing staged is left");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// GitHub's step summary is appended to, never through a planted link and
/// never waiting on a FIFO named there; a regular file gets the summary
/// after what it held.
#[test]
fn a_step_summary_is_appended_only_to_a_regular_file() {
    let dir = tempdir("summary-target");
    let secret = dir.join("secret");
    std::fs::write(&secret, "keep me").unwrap();
    let planted = dir.join("link.md");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let fifo = dir.join("pipe.md");
    mkfifo(&fifo);
    let regular = dir.join("summary.md");
    std::fs::write(&regular, "before\n").unwrap();
    let append = |path: &Path| idem::files::write::append(path, b"after\n", "GITHUB_STEP_SUMMARY");
    let started = Instant::now();
    let link = append(&planted).unwrap_err().to_string();
    assert!(link.contains("symbolic link"), "{link}");
    let pipe = append(&fifo).unwrap_err().to_string();
    assert!(pipe.contains("not a regular file"), "{pipe}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it waited on the FIFO"
    );
    append(&regular).unwrap();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep me");
    assert_eq!(
        std::fs::read_to_string(&regular).unwrap(),
        "before\nafter\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
