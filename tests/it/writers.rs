//! Every file idem writes goes through its one safe writer: a planted link is never written through, a FIFO never waited on, and the progress lives where the XDG rules say.
//!
//! The timeline and trace have their own tests in hostile.rs; these are
//! the other writers: man pages, completion scripts, exercises and the
//! learner's progress.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::Sandbox;

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
            target: dir.join("1-one-row.toml"),
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
        "lessons_read = [1, 11]\n",
        "exercises_passed = [255]\n",
        "[hints_seen]\nx = 1\n",
    ] {
        std::fs::write(&file, text).unwrap();
        let line = crate::common::refused_in_one_line(sandbox.idem().arg("progress"));
        assert!(line.contains("is not idem's progress"), "{text}: {line}");
        assert!(line.contains("lessons go from 1 to 10"), "{text}: {line}");
        let (_, stderr) = run(&sandbox, &state, &["hint".into(), "2".into()]);
        assert!(stderr.contains("progress not saved"), "{text}: {stderr}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}
