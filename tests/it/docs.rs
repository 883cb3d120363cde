//! The manual cannot drift: every command in README.md and docs/ runs as printed, and its output is compared.
//!
//! trycmd reads each page's ```console blocks: a `$ ` line is a command (a
//! `> ` line continues it, as a shell's second prompt shows a `\`
//! continuation), the lines under it are its expected output, stdout and
//! stderr together (`...` stands for any lines, `[..]` for any text within
//! one), and `? 1` says the command exits 1. A block marked
//! ```console,ignore needs something the test cannot be: a service of
//! yours, a terminal, your home directory. Its page says so, and its
//! commands are parsed by idem's own command line (examples/parse_only.rs)
//! and not run. `cargo`, `curl` and `ruby` lines are never run here: the
//! first is what CI itself runs, the others are the reader's own programs.
//!
//! Each page runs in a folder of its own, with a state directory of its own
//! (its lessons read, its hints seen) and clusters that must all be gone
//! when it ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{Sandbox, TIMING};

/// The pages whose commands print no figure that hangs on timing: an
/// exploration and a stepped schedule are the same in every run, and a
/// refused URL races nothing. learning.md's figures are an exercise's check and a lesson read, the
/// same in every run.
const UNTIMED: &[&str] = &[
    "docs/explore.md",
    "docs/where-the-tables-live.md",
    "docs/learning.md",
];

/// The programs a page may show that the test does not run.
const NOT_RUN: &[&str] = &["cargo", "curl", "ruby"];

/// The line that marks the next console block of a timed page as one
/// whose output hangs on no timing (its commands print `...`, say): it
/// runs apart from the timing lock, in a state directory of its own.
const UNTIMED_BLOCK: &str = "<!-- untimed:";

/// Which of a page's console blocks a run takes.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// Every block, then the ignored ones parsed.
    Whole,
    /// The blocks not marked untimed, then the ignored ones parsed.
    Timed,
    /// Only the blocks marked untimed.
    Untimed,
}

/// Runs `page`'s console blocks, then parses its ignored ones.
fn check(page: &str) {
    check_part(page, Part::Whole);
}

/// `text` with the console blocks `part` does not take set aside as text.
fn only(text: &str, part: Part) -> String {
    let mut marked = false;
    let mut out = String::new();
    for line in text.lines() {
        let line = match line {
            "```console" if part != Part::Whole && (marked != (part == Part::Untimed)) => "```text",
            other => other,
        };
        if line.starts_with("```") {
            marked = false;
        }
        marked |= line.starts_with(UNTIMED_BLOCK);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Runs the console blocks of `page` that `part` takes, then (unless only
/// its untimed blocks) parses its ignored ones.
fn check_part(page: &str, part: Part) {
    // trycmd can add to the commands' environment but not take from it, and
    // a page's races must not reach a database of the reader's.
    let unset = std::env::var_os("DATABASE_URL").is_none();
    if !crate::common::runnable(
        page,
        unset,
        "DATABASE_URL is set; the pages run on disposable clusters",
    ) {
        return;
    }
    let name = Path::new(page)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap()
        .to_owned();
    let sandbox = Sandbox::new(&format!("docs-{name}"));
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).unwrap();
    let text = only(&text, part);

    // As printed: the page's own text, in a folder beside the sandbox; the
    // `.out` folder beside it tells trycmd to run the page's commands in a
    // fresh folder of their own.
    let ran = Staged::new(&sandbox, &name, "run", &text);
    cases(&sandbox)
        .register_bin("idem", trycmd::cargo::cargo_bin("idem"))
        .case(&ran.page)
        .run();
    let left = sandbox.wait_clean(Duration::from_secs(10));
    assert!(left.is_empty(), "{page}'s commands left {left:?}");
    if part == Part::Untimed {
        return;
    }

    // Only parsed: the ignored blocks become the page's console blocks, and
    // the console blocks already run are set aside as text.
    let parsed: String = text
        .lines()
        .map(|line| match line {
            "```console" => "```text",
            "```console,ignore" => "```console",
            other => other,
        })
        .fold(String::new(), |all, line| all + line + "\n");
    let parsed = Staged::new(&sandbox, &name, "parse", &parsed);
    cases(&sandbox)
        .register_bin("idem", crate::common::example("parse_only"))
        .case(&parsed.page)
        .run();
}

/// trycmd's cases with idem isolated in `sandbox`, as the other tests'.
fn cases(sandbox: &Sandbox) -> trycmd::TestCases {
    let cases = trycmd::TestCases::new();
    cases
        .env("TMPDIR", sandbox.dir.display().to_string())
        .env("XDG_STATE_HOME", sandbox.state().display().to_string())
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .timeout(Duration::from_secs(300));
    for program in NOT_RUN {
        cases.register_bin(*program, trycmd::schema::Bin::Ignore);
    }
    cases
}

/// A page's text as `name.md` in a folder of its own beside a sandbox,
/// with the `name.out` folder that has trycmd give each run a fresh
/// working folder; all of it removed when dropped.
struct Staged {
    folder: PathBuf,
    page: PathBuf,
}

impl Staged {
    fn new(sandbox: &Sandbox, name: &str, pass: &str, text: &str) -> Self {
        let folder = sandbox.dir.with_extension(pass);
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(folder.join(format!("{name}.out"))).unwrap();
        // What a page's commands read from the repository, as they would
        // from a clone: the guard files written for MariaDB.
        let examples = folder.join(format!("{name}.in/examples/mariadb"));
        std::fs::create_dir_all(&examples).unwrap();
        for file in std::fs::read_dir("examples/mariadb").unwrap().flatten() {
            std::fs::copy(file.path(), examples.join(file.file_name())).unwrap();
        }
        let page = folder.join(format!("{name}.md"));
        std::fs::write(&page, text).unwrap();
        Self { folder, page }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// The pages whose commands print figures that hang on timing: run one
/// after another in one test that holds the timing lock once, as the other
/// tests with such figures run alone, so that no test thread sits waiting
/// for the lock page by page.
/// README.md runs last: its first race is the course's figure, and the
/// suite's first seconds (every test thread starting a cluster at once)
/// are its busiest.
const TIMED: &[&str] = &[
    "docs/races.md",
    "docs/losers.md",
    "docs/keys.md",
    "docs/stores.md",
    "docs/guard.md",
    "docs/transactions.md",
    "docs/over-the-wire.md",
    "docs/request-life.md",
    "docs/standby.md",
    "docs/engines.md",
    "README.md",
];

#[test]
fn the_pages_with_figures() {
    let _serial = TIMING.blocking_lock();
    let failed: Vec<&str> = TIMED
        .iter()
        .copied()
        .filter(|page| std::panic::catch_unwind(|| check_part(page, Part::Timed)).is_err())
        .collect();
    assert!(
        failed.is_empty(),
        "these pages' commands printed other than the page shows (above): {failed:?}"
    );
}

/// The blocks of the timed pages marked untimed (an `idem matrix` whose
/// output the page leaves as `...`), outside the timing lock.
#[test]
fn the_untimed_blocks_of_the_pages_with_figures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut marked = 0;
    for page in TIMED {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        if text.contains(UNTIMED_BLOCK) {
            marked += 1;
            check_part(page, Part::Untimed);
        }
    }
    assert!(
        marked > 0,
        "no block is marked {UNTIMED_BLOCK}: drop this test"
    );
}

#[test]
fn learning() {
    check("docs/learning.md");
}

#[test]
fn explore() {
    check("docs/explore.md");
}

#[test]
fn ci() {
    check("docs/ci.md");
}

#[test]
fn where_the_tables_live() {
    check("docs/where-the-tables-live.md");
}

#[test]
fn tests() {
    check("docs/tests.md");
}

/// Every page whose console blocks run idem is checked, and held to the
/// timing lock unless its output cannot hang on timing.
#[test]
fn every_page_that_runs_idem_is_checked() {
    let mut pages = vec!["README.md".to_string()];
    for entry in std::fs::read_dir("docs").unwrap().flatten() {
        pages.push(format!("docs/{}", entry.file_name().to_string_lossy()));
    }
    for page in pages.iter().filter(|p| p.ends_with(".md")) {
        let text = std::fs::read_to_string(page).unwrap();
        if text.lines().any(|l| l.starts_with("$ idem ")) {
            assert!(
                TIMED.contains(&page.as_str()) || UNTIMED.contains(&page.as_str()),
                "{page} runs idem: add it to TIMED (or UNTIMED, if nothing it prints hangs on timing)"
            );
        }
    }
}

/// The pages with no command in them, so that one that gains a command is
/// run too.
#[test]
fn the_rest() {
    for page in [
        "docs/code.md",
        "docs/benchmarks.md",
        "docs/distributed-engines.md",
    ] {
        check(page);
    }
}

/// Every link between the pages leads somewhere: a file that is there and,
/// after a `#`, one of its headings (by the slug GitHub and mdBook make of
/// it); and docs/SUMMARY.md lists every page of docs/.
#[test]
fn links_lead_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut listed: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    listed.sort();
    pages.extend(listed.iter().cloned());
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = match file {
                "" => page.clone(),
                file => page.parent().unwrap().join(file),
            };
            let shown = format!("{} → {target}", page.strip_prefix(root).unwrap().display());
            if !path.exists() {
                broken.push(format!("{shown}: no such file"));
            } else if !anchor.is_empty() {
                let headings = std::fs::read_to_string(&path).unwrap();
                if !headings_of(&headings).iter().any(|h| slug(h) == anchor) {
                    broken.push(format!("{shown}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");

    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    let in_summary = links(&summary);
    for page in listed {
        let name = page.file_name().unwrap().to_str().unwrap();
        assert!(
            name == "SUMMARY.md" || in_summary.iter().any(|l| l == name),
            "docs/SUMMARY.md lists {name}"
        );
    }
}

/// The targets of a page's inline links, `[text](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    found
}

/// A page's headings (`#` to `####`), outside code.
fn headings_of(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            !fenced && line.starts_with('#')
        })
        .filter_map(|line| line.split_once(' ').map(|(_, h)| h.trim().to_string()))
        .collect()
}

/// The anchor GitHub and mdBook give a heading: lower case, letters,
/// digits, `-` and `_` kept, spaces made `-`, the rest dropped.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
