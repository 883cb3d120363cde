//! The layers of `src/` point one way: no module uses one above it, and no two use each other.
//!
//! Read from the code's own `crate::` paths, as `../shared/tools/layers.py`
//! reads them. Run it alone with `cargo test --test it layers::`; with `IDEM_PRINT_EDGES=1`
//! and `-- --nocapture` it also prints what each folder and file uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top to bottom. A module may use the modules of its own layer or below,
/// never above.
const LAYERS: &[(&str, &[&str])] = &[
    ("the command line", &["app", "cli", "commands", "signals"]),
    ("output", &["report"]),
    (
        "teaching and measuring",
        &[
            "challenge",
            "exercise",
            "explore",
            "scenario",
            "bench",
            "lesson",
            "progress",
            "probe",
            "matrix",
            "pooler",
        ],
    ),
    ("lesson 6's clients", &["keys"]),
    ("the race harness", &["race"]),
    ("the wire", &["http"]),
    ("the strategies", &["strategy"]),
    ("the request contract", &["request"]),
    ("the stores", &["store"]),
    ("the database", &["db"]),
    ("the TLS trust both wires share", &["trust"]),
    ("the bounds and defaults of every setting", &["limits"]),
    (
        "commands whose process group never outlives idem",
        &["lifeline"],
    ),
    ("the files idem reads and writes", &["files"]),
    (
        "text from a file or a server, made safe to show",
        &["controls"],
    ),
    ("tasks that end with their handle", &["tasks"]),
];

/// Each top-level module's files.
fn modules(src: &Path) -> BTreeMap<String, Vec<std::path::PathBuf>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            let mut files = Vec::new();
            let mut stack = vec![path];
            while let Some(dir) = stack.pop() {
                for e in std::fs::read_dir(dir).unwrap().flatten() {
                    if e.path().is_dir() {
                        stack.push(e.path());
                    } else if e.path().extension().is_some_and(|x| x == "rs") {
                        files.push(e.path());
                    }
                }
            }
            found.insert(name, files);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "main"
            && stem != "lib"
        {
            found.insert(stem.to_string(), vec![path]);
        }
    }
    found
}

/// The top-level modules a file names through `crate::`, unit tests left out.
fn uses(text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            // use crate::{a::X, b, c::{Y, Z}};
            let end = group.find("};").unwrap_or(group.len());
            group[..end]
                .split([',', '\n'])
                .filter_map(|part| part.trim().split("::").next())
                .collect()
        } else {
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .take(1)
                .collect()
        };
        found.extend(
            names
                .into_iter()
                .filter(|n| known.contains(*n))
                .map(str::to_string),
        );
    }
    found
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(Path::new("src"));
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, files)| {
            let mut used = BTreeSet::new();
            for file in files {
                used.extend(uses(&std::fs::read_to_string(file).unwrap(), &known));
            }
            used.remove(name);
            (name.clone(), used)
        })
        .collect()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

#[test]
fn every_module_of_src_has_a_layer() {
    let unplaced: Vec<String> = edges()
        .keys()
        .filter(|m| layer_of(m).is_none())
        .cloned()
        .collect();
    assert_eq!(unplaced, Vec::<String>::new(), "add them to LAYERS");
}

#[test]
fn no_module_uses_one_in_a_layer_above_it() {
    if std::env::var_os("IDEM_PRINT_EDGES").is_some() {
        for (module, used) in edges() {
            let used: Vec<String> = used.into_iter().collect();
            eprintln!("folder {module}: {}", used.join(" "));
        }
    }
    let mut upward = Vec::new();
    for (module, used) in edges() {
        for target in used {
            if let (Some(from), Some(to)) = (layer_of(&module), layer_of(&target))
                && to < from
            {
                upward.push(format!(
                    "{module} ({}) uses {target} ({})",
                    LAYERS[from].0, LAYERS[to].0
                ));
            }
        }
    }
    assert_eq!(upward, Vec::<String>::new());
}

#[test]
fn no_two_modules_use_each_other_even_through_others() {
    let cycles: Vec<String> = on_circles(&edges()).into_iter().collect();
    assert_eq!(cycles, Vec::<String>::new(), "modules on a cycle");
}

/// The nodes that can reach themselves: those on a circle.
fn on_circles<T: Ord + Clone>(edges: &BTreeMap<T, BTreeSet<T>>) -> BTreeSet<T> {
    let mut found = BTreeSet::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&T> = edges[start].iter().collect();
        while let Some(node) = stack.pop() {
            if node == start {
                found.insert(start.clone());
                break;
            }
            if seen.insert(node) {
                stack.extend(edges.get(node).into_iter().flatten());
            }
        }
    }
    found
}

#[test]
fn the_check_reads_uses_as_written() {
    let known: BTreeSet<String> = ["race", "db", "strategy"].map(String::from).into();
    let text = "use crate::race::Race;\nuse crate::{db::Database, strategy};\nfn f() { crate::race::x() }\n";
    assert_eq!(uses(text, &known), known);
}

/// Circles between files inside a module that are known and not yet
/// broken. A new circle fails the test below; one of these, once broken,
/// must leave this list. None are left: the last two (a `mod.rs` that
/// defined what its files use and also called into them) were broken by
/// moving what the files use into files of their own.
const KNOWN_FILE_CIRCLES: &[&[&str]] = &[];

/// A file's module path: `src/race/runner.rs` is `race::runner`; a
/// `mod.rs` is its folder's module; `lib.rs` is the root.
type ModPath = Vec<String>;

fn module_files() -> BTreeMap<ModPath, std::path::PathBuf> {
    let src = Path::new("src");
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let relative = path.strip_prefix(src).unwrap().with_extension("");
                let mut at: ModPath = relative
                    .iter()
                    .map(|s| s.to_string_lossy().to_string())
                    .collect();
                if matches!(at.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    at.pop();
                }
                found.insert(at, path);
            }
        }
    }
    found
}

/// The code of a file: unit tests, comments and re-exports (`pub use`, a
/// facade's door, not a use) left out.
fn code_of(text: &str, keep_reexports: bool) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            keep_reexports == (l.starts_with("pub use ") || l.starts_with("pub(crate) use "))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The module paths named in `text`, read from `at` (whose child modules
/// are `children`): `crate::a::b`, `super::c`, `self::d`, `child::e`, and
/// groups `x::{A, b::C}`.
fn paths_in(text: &str, at: &[String], children: &BTreeSet<String>) -> BTreeSet<ModPath> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let chars: Vec<char> = text.chars().collect();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = word(chars[i]) && (i == 0 || !(word(chars[i - 1]) || chars[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (word(chars[i]) || chars[i] == ':') {
            i += 1;
        }
        let run: String = chars[start..i].iter().collect();
        if !run.contains("::") {
            continue;
        }
        let mut parts: Vec<String> = run
            .split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let mut groups: Vec<Vec<String>> = vec![Vec::new()];
        let close = chars[i..].iter().position(|c| *c == '}');
        if let (true, Some(close)) = (run.ends_with("::") && chars.get(i) == Some(&'{'), close) {
            let inner: String = chars[i + 1..i + close].iter().collect();
            groups = inner
                .split(',')
                .map(|g| {
                    g.trim()
                        .split("::")
                        .filter(|p| !p.is_empty() && p.chars().all(word))
                        .map(String::from)
                        .collect()
                })
                .collect();
        }
        let mut base: ModPath = match parts[0].as_str() {
            "crate" => {
                parts.remove(0);
                Vec::new()
            }
            "self" => {
                parts.remove(0);
                at.to_vec()
            }
            "super" => {
                let mut base = at.to_vec();
                while parts.first().map(String::as_str) == Some("super") {
                    base.pop();
                    parts.remove(0);
                }
                base
            }
            first if children.contains(first) => at.to_vec(),
            _ => continue,
        };
        base.extend(parts);
        for group in groups {
            let mut full = base.clone();
            full.extend(group);
            found.insert(full);
        }
    }
    found
}

fn children_of(at: &[String], files: &BTreeMap<ModPath, std::path::PathBuf>) -> BTreeSet<String> {
    files
        .keys()
        .filter(|k| k.len() == at.len() + 1 && k.starts_with(at))
        .map(|k| k[at.len()].clone())
        .collect()
}

/// The file where a named path is written: the longest prefix that is a
/// file, followed through that file's re-exports.
fn file_of(
    path: &[String],
    files: &BTreeMap<ModPath, std::path::PathBuf>,
    reexports: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
) -> Option<ModPath> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let file = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| files.contains_key(prefix))?;
        let target = path
            .get(file.len())
            .and_then(|name| reexports.get(&file)?.get(name))
            .filter(|target| **target != path);
        match target {
            Some(target) => {
                let mut followed = target.clone();
                followed.extend(path[file.len() + 1..].iter().cloned());
                path = followed;
            }
            None => return Some(file),
        }
    }
    None
}

fn file_edges() -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let files = module_files();
    let texts: BTreeMap<&ModPath, String> = files
        .iter()
        .map(|(at, path)| (at, std::fs::read_to_string(path).unwrap()))
        .collect();
    let reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = files
        .keys()
        .map(|at| {
            let shown = paths_in(&code_of(&texts[at], true), at, &children_of(at, &files));
            let names = shown
                .into_iter()
                .filter_map(|p| Some((p.last()?.clone(), p)))
                .collect();
            (at.clone(), names)
        })
        .collect();
    files
        .keys()
        .map(|at| {
            let used = paths_in(&code_of(&texts[at], false), at, &children_of(at, &files))
                .iter()
                .filter_map(|p| file_of(p, &files, &reexports))
                .filter(|f| f != at && !f.is_empty())
                .collect();
            (at.clone(), used)
        })
        .collect()
}

#[test]
fn no_two_files_use_each_other_but_the_known_circles() {
    if std::env::var_os("IDEM_PRINT_EDGES").is_some() {
        for (file, used) in file_edges() {
            let used: Vec<String> = used.iter().map(|f| f.join("::")).collect();
            eprintln!("file {}: {}", file.join("::"), used.join(" "));
        }
    }
    let on_circles: BTreeSet<String> = on_circles(&file_edges())
        .iter()
        .map(|f| f.join("::"))
        .collect();
    let known: BTreeSet<String> = KNOWN_FILE_CIRCLES
        .iter()
        .flat_map(|c| c.iter().map(|f| f.to_string()))
        .collect();
    let new: Vec<&String> = on_circles.difference(&known).collect();
    let broken: Vec<&String> = known.difference(&on_circles).collect();
    assert_eq!(new, Vec::<&String>::new(), "files on a new circle");
    assert_eq!(
        broken,
        Vec::<&String>::new(),
        "broken circles: take them off the list"
    );
}

#[test]
fn the_file_check_reads_paths_as_written() {
    let at: ModPath = vec!["strategy".into(), "guard".into()];
    let children: BTreeSet<String> = ["core".to_string()].into();
    let text = "use super::claims::{claim, complete};\nuse crate::db::pool::Conn;\nfn f() { core::attempt() }\n";
    let used = paths_in(text, &at, &children);
    let path = |p: &str| p.split("::").map(String::from).collect::<ModPath>();
    for expected in [
        "strategy::claims::claim",
        "db::pool::Conn",
        "strategy::guard::core::attempt",
    ] {
        assert!(used.contains(&path(expected)), "{expected}: {used:?}");
    }
}

/// What a pooler in transaction mode cannot pass is made in one place
/// each: sqlx statements (named, and sent in two round trips) only in
/// `db::book`, which makes them unnamed for a transaction; the workers'
/// statements prepared by name only in `db::statements`, which does so on
/// idem's own cluster alone; other prepared statements only where nothing
/// goes through a pooler (the benchmark's bare floor), inside the one
/// transaction that runs and closes them (the probe's count), and where
/// `idem pooler` shows one failing through PgBouncer.
#[test]
fn statements_a_pooler_cannot_pass_are_made_in_one_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: &[(&str, &[&str])] = &[
        // A MySQL count is prepared on purpose (one statement, no more),
        // and the MariaDB races' statements are MySQL's: none goes
        // through PgBouncer.
        (
            "sqlx::query",
            &[
                "db/book.rs",
                "probe/count_mysql.rs",
                "request/mariadb.rs",
                "race/mariadb/mod.rs",
                "db/mariadb/mod.rs",
                "db/mariadb/watch.rs",
                "db/mariadb/liveness.rs",
                "db/mariadb/galera.rs",
                "race/mariadb/cluster.rs",
                "race/mariadb/behind.rs",
                "race/mariadb/worker.rs",
                "db/mariadb/guard_user.rs",
            ],
        ),
        ("prepare_cached(", &[]),
        ("prepare_typed_cached(", &["db/statements.rs"]),
        (
            ".prepare(",
            &[
                "bench/script.rs",
                "bench/throughput.rs",
                "probe/count.rs",
                "pooler.rs",
                // A MariaDB guard file's statements, checked before its
                // race on the guard user's connection; no pooler there.
                "strategy/guard_file/on_mariadb.rs",
            ],
        ),
    ];
    let mut stack = vec![src.clone()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            for (call, places) in allowed {
                let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
                if code.clone().any(|l| l.contains(call)) && !places.contains(&name.as_str()) {
                    found.push(format!("{name}: {call}"));
                }
            }
        }
    }
    assert_eq!(found, Vec::<String>::new());
}

/// No module of src/ or of the tests is over 800 lines: a module that
/// grows past it is split by what it holds, the day it grows.
#[test]
fn no_module_is_over_800_lines() {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > 800 {
                    found.push(format!("{} has {lines} lines", path.display()));
                }
            }
        }
    }
    let mut over = Vec::new();
    for dir in ["src", "tests", "examples"] {
        walk(Path::new(dir), &mut over);
    }
    assert_eq!(over, Vec::<String>::new());
}
