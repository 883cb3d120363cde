//! The layers of `src/` point one way: no module uses one above it, and no two use each other.
//!
//! Read from the code's own `crate::` paths, as `../shared/tools/layers.py`
//! reads them. Run it alone with `cargo test --test layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top to bottom. A module may use the modules of its own layer or below,
/// never above.
const LAYERS: &[(&str, &[&str])] = &[
    ("the command line", &["app", "cli", "commands", "signals"]),
    ("output", &["report"]),
    (
        "teaching and measuring",
        &["challenge", "scenario", "bench", "lesson", "probe"],
    ),
    ("lesson 6's clients", &["keys"]),
    ("the race harness", &["race"]),
    ("the wire", &["http"]),
    ("the strategies", &["strategy"]),
    ("the request contract", &["request"]),
    ("the stores", &["store"]),
    ("the database", &["db"]),
    ("the TLS both wires share", &["tls"]),
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
    let edges = edges();
    // A module that can reach itself is on a cycle.
    let mut cycles = Vec::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = edges[start].iter().collect();
        while let Some(m) = stack.pop() {
            if m == start {
                cycles.push(start.clone());
                break;
            }
            if seen.insert(m) {
                stack.extend(edges.get(m).into_iter().flatten());
            }
        }
    }
    assert_eq!(cycles, Vec::<String>::new(), "modules on a cycle");
}

#[test]
fn the_check_reads_uses_as_written() {
    let known: BTreeSet<String> = ["race", "db", "strategy"].map(String::from).into();
    let text = "use crate::race::Race;\nuse crate::{db::Database, strategy};\nfn f() { crate::race::x() }\n";
    assert_eq!(uses(text, &known), known);
}
