//! The shell's side of idem: completion scripts and man pages, made from the same definitions as the parser.

use crate::common::Sandbox;

/// Every shell clap_complete knows gets a script that completes idem's
/// commands; `--dir` writes the same script under the name that shell
/// looks for, into a directory made if missing.
#[test]
fn every_shell_gets_a_completion_script() {
    let sandbox = Sandbox::new("completions");
    let dir = sandbox.dir.join("share/completions");
    for (shell, file) in [
        ("bash", "idem.bash"),
        ("zsh", "_idem"),
        ("fish", "idem.fish"),
        ("powershell", "_idem.ps1"),
        ("elvish", "idem.elv"),
    ] {
        let out = sandbox
            .idem()
            .args(["completions", shell])
            .assert()
            .success();
        let script = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        for command in ["race", "probe", "lesson", "completions"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
        sandbox
            .idem()
            .args(["completions", shell, "--dir"])
            .arg(&dir)
            .assert()
            .success();
        let written = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(written, script, "{shell}'s script in {file}");
    }
    let line = crate::common::refused_in_one_line(
        sandbox
            .idem()
            .args(["completions", "bash", "--dir"])
            .arg(dir.join("_idem")),
    );
    assert!(line.contains("is not a directory"), "{line}");
}

/// `idem man` names every command a user can run; `--dir` writes a page
/// for each, and refuses what is not a directory in one line.
#[test]
fn the_man_page_names_every_command() {
    let sandbox = Sandbox::new("man");
    let out = sandbox.idem().arg("man").assert().success();
    let page = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(page.starts_with(".ie") || page.contains(".TH idem"), "roff");
    let help = sandbox.idem().arg("--help").assert().success();
    let help = String::from_utf8_lossy(&help.get_output().stdout).to_string();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line, not the wrapped rest of a description.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 20, "{commands:?}");
    for command in &commands {
        assert!(
            page.contains(&format!("idem\\-{}(1)", command.replace('-', "\\-"))),
            "the man page names {command}"
        );
    }
    // Made if missing, as `man1` under a fresh home would be.
    let dir = sandbox.dir.join("share/man/man1");
    sandbox
        .idem()
        .args(["man", "--dir"])
        .arg(&dir)
        .assert()
        .success();
    for command in &commands {
        assert!(dir.join(format!("idem-{command}.1")).is_file(), "{command}");
    }
    let line = crate::common::refused_in_one_line(
        sandbox
            .idem()
            .args(["man", "--dir"])
            .arg(dir.join("idem.1")),
    );
    assert!(line.contains("is not a directory"), "{line}");
}
