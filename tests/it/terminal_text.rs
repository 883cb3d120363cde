//! What a guard or scenario file says reaches a terminal as text: the escape sequences it holds are written out, never sent to the terminal to obey.
//!
//! Each command runs under `script`, on a real pseudo-terminal with colour
//! on, and the bytes the terminal received are searched for the file's
//! sequences: an OSC 52 that would set the clipboard, a screen clear that
//! could paint a fake verdict, and a title.

use std::path::Path;
use std::process::Command;

use crate::common::Sandbox;

/// The sequences a hostile file holds, as TOML escapes and as the bytes a
/// terminal would obey.
const OSC52_TOML: &str = r"\u001b]52;c;cHduZWQ=\u0007";
const CLEAR_TOML: &str = r"\u001b[2J\u001b[H";
const TITLE_TOML: &str = r"\u001b]0;held\u0007";
const OBEYED: [&[u8]; 3] = [b"\x1b]52;", b"\x1b[2J", b"\x1b]0;"];

/// Runs `idem ARGS` on a pseudo-terminal in `dir`; returns every byte the
/// terminal received.
fn on_a_terminal(sandbox: &Sandbox, dir: &Path, args: &str) -> Vec<u8> {
    let idem = assert_cmd::cargo::cargo_bin("idem");
    let typescript = dir.join("typescript");
    let status = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{} {args}", idem.display()))
        .arg(&typescript)
        .current_dir(dir)
        .env("TMPDIR", &sandbox.dir)
        .env("XDG_STATE_HOME", sandbox.state())
        .env_remove("NO_COLOR")
        .env_remove("DATABASE_URL")
        .env("COLUMNS", "200")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("script(1) runs (util-linux)");
    let _ = status;
    std::fs::read(&typescript).unwrap()
}

fn obeyed(bytes: &[u8]) -> Vec<&'static str> {
    OBEYED
        .iter()
        .filter(|seq| bytes.windows(seq.len()).any(|w| w == **seq))
        .map(|seq| std::str::from_utf8(&seq[1..]).unwrap())
        .collect()
}

/// A guard file's statement shown by `--sql`, by `idem step`, and quoted
/// back in PostgreSQL's error; a scenario file's value quoted in its
/// refusal: all on a terminal, with colour, and none of the file's
/// sequences reaches it raw. The written-out form does.
#[test]
fn a_files_escape_sequences_reach_the_terminal_as_text() {
    let sandbox = Sandbox::new("terminal-text");
    let dir = sandbox.dir.join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let store = "INSERT INTO idempotency_keys (key, operation, status, response_code, \
                 response_body, worker, completed_at) VALUES ($key, $operation, 'completed', \
                 $response_code, $response, $worker, now())";
    let shown = format!(
        "shape = \"find-then-store\"\n[steps]\nfind = \"\"\"\nSELECT response_body FROM \
         idempotency_keys -- {OSC52_TOML} {CLEAR_TOML} {TITLE_TOML}\nWHERE key = $key AND \
         operation = $operation\n\"\"\"\nstore = \"\"\"\n{store}\n\"\"\"\n"
    );
    std::fs::write(dir.join("shown.toml"), shown).unwrap();
    let failing = format!(
        "shape = \"find-then-store\"\n[steps]\nfind = \"\"\"\nSELECT \"{CLEAR_TOML}{OSC52_TOML}\" \
         FROM idempotency_keys WHERE key = $key\n\"\"\"\nstore = \"\"\"\n{store}\n\"\"\"\n"
    );
    std::fs::write(dir.join("failing.toml"), failing).unwrap();
    let scenario = format!("[race]\nstrategy = \"{CLEAR_TOML}{OSC52_TOML}check\"\n");
    std::fs::write(dir.join("scenario.toml"), scenario).unwrap();
    for (args, expect) in [
        (
            "race --strategy-file shown.toml --sql --workers 2",
            "\\x1b]52;",
        ),
        (
            "step --strategy-file shown.toml --workers 2 --schedule 1,2,1,2 --sql",
            "\\x1b]52;",
        ),
        ("race --strategy-file failing.toml --workers 2", "\\x1b[2J"),
        ("scenario run scenario.toml", "\\x1b[2J"),
    ] {
        let bytes = on_a_terminal(&sandbox, &dir, args);
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(obeyed(&bytes), Vec::<&str>::new(), "idem {args}:\n{text}");
        assert!(
            text.contains(expect),
            "idem {args} shows it written out:\n{text}"
        );
    }
}
