//! A type with behaviour keeps its fields: bare `pub` fields stay few on types that have inherent methods, records aside (serde's and clap's types, which are what they show).
//!
//! Read from the source as written. Run alone with `cargo test --test it
//! fields::`; with `IDEM_PRINT_FIELDS=1` it lists the types and their count.

use std::collections::{BTreeMap, BTreeSet};

/// The most bare `pub` fields all such types may have together.
const MOST: usize = 100;

/// Every `.rs` file under `src/`, with its text.
fn sources() -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![std::path::PathBuf::from("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                found.push((path.display().to_string(), text));
            }
        }
    }
    found
}

/// The word after `keyword ` at the start of a trimmed line, up to `<`, ` `
/// or `{`: `impl Race<'_> {` gives `Race`.
fn name_after<'a>(line: &'a str, keyword: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(keyword)?;
    let rest = match rest.strip_prefix('<') {
        // `impl<'a> Name<'a> {`: skip the generics.
        Some(generic) => generic.split_once("> ")?.1,
        None => rest.strip_prefix(' ')?,
    };
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The types with an inherent `impl` (not `impl Trait for`).
fn with_methods(files: &[(String, String)]) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (_, text) in files {
        for line in text.lines().map(str::trim) {
            if line.contains(" for ") || !line.ends_with('{') {
                continue;
            }
            if let Some(name) = name_after(line, "impl") {
                named.insert(name.to_string());
            }
        }
    }
    named
}

/// Each struct's bare `pub` fields, for structs that are not records.
fn bare_pub_fields(files: &[(String, String)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (file, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let decl = trimmed
                .strip_prefix("pub(crate) ")
                .or_else(|| trimmed.strip_prefix("pub(super) "))
                .or_else(|| trimmed.strip_prefix("pub "))
                .unwrap_or(trimmed);
            let Some(name) = name_after(decl, "struct") else {
                continue;
            };
            if !line.ends_with('{') {
                continue;
            }
            let attributes: String = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("#[") || l.starts_with("///") || l.starts_with("//")
                })
                .copied()
                .collect();
            let record = ["Serialize", "Deserialize", "Args", "Parser"]
                .iter()
                .any(|d| attributes.contains(d));
            if record {
                continue;
            }
            let indent = line.len() - trimmed.len();
            let bare = lines[i + 1..]
                .iter()
                .take_while(|l| !(l.trim_start() == "}" && l.len() - 1 == indent))
                .filter(|l| {
                    let l = l.trim_start();
                    l.strip_prefix("pub ").is_some_and(|rest| {
                        rest.split_once(':').is_some_and(|(f, _)| {
                            f.chars().all(|c| c.is_alphanumeric() || c == '_')
                        })
                    })
                })
                .count();
            if bare > 0 {
                *counts.entry(format!("{name} ({file})")).or_default() += bare;
            }
        }
    }
    counts
}

#[test]
fn types_with_behaviour_keep_their_fields() {
    let files = sources();
    let methods = with_methods(&files);
    let counts: BTreeMap<String, usize> = bare_pub_fields(&files)
        .into_iter()
        .filter(|(name, _)| methods.contains(name.split(' ').next().unwrap()))
        .collect();
    let total: usize = counts.values().sum();
    if std::env::var_os("IDEM_PRINT_FIELDS").is_some() {
        for (name, n) in &counts {
            eprintln!("{n:3} {name}");
        }
        eprintln!(
            "{total} bare pub fields on {} types with methods",
            counts.len()
        );
    }
    assert!(
        total <= MOST,
        "{total} bare pub fields on types with methods, more than {MOST}: make them private \
         or pub(crate), with accessors where others read them (IDEM_PRINT_FIELDS=1 lists them)"
    );
}
