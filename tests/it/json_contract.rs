//! The `--json` contract: the published schema in `schemas/` against the real output, and against docs/races.md.

use serde_json::Value;

use crate::common::Sandbox;

fn schema() -> Value {
    let text = std::fs::read_to_string("schemas/race-result.schema.json").unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("the schema is a valid JSON Schema")
}

/// Runs idem and returns its stdout's JSON lines.
fn json_lines(args: &[&str]) -> Vec<Value> {
    let out = Sandbox::new("json-contract")
        .idem()
        .args(args)
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
        .collect()
}

#[test]
fn race_and_compare_output_matches_the_published_schema() {
    let runs: [&[&str]; 11] = [
        &["race", "--json", "--work-ms", "1", "--runs", "2"],
        &[
            "race",
            "--json",
            "--http",
            "--replicas",
            "2",
            "--work-ms",
            "1",
        ],
        &[
            "race",
            "--json",
            "--isolation",
            "serializable",
            "--retry-serialization",
            "2",
        ],
        &["race", "--json", "--http", "--work-ms", "1", "--runs", "2"],
        &["compare", "--json", "--http", "--work-ms", "1"],
        &[
            "race",
            "--json",
            "-s",
            "claim-work-complete",
            "--loser",
            "poll",
            "--work-ms",
            "30",
        ],
        &[
            "race",
            "--json",
            "-s",
            "claim-work-complete",
            "--loser",
            "block",
            "--work-ms",
            "30",
        ],
        &[
            "race",
            "--json",
            "-s",
            "claim-work-complete",
            "--store",
            "cache",
            "--amounts",
            "10,20,10,30,10",
        ],
        &[
            "race",
            "--json",
            "-s",
            "guard",
            "--crash",
            "at=after-claim",
            "--stale-after-ms",
            "100",
            "--pool-size",
            "6",
        ],
        &["compare", "--json", "--work-ms", "1"],
        &["compare", "--losers", "--json", "--work-ms", "20"],
    ];
    matches_the_schema(&runs);
}

#[test]
fn redis_races_match_the_published_schema() {
    let race = [
        "race",
        "--json",
        "-s",
        "claim-work-complete",
        "--store",
        "redis",
    ];
    // The cache traffic, then a replica, its WAIT and its failover.
    let redis: [&[&str]; 2] = [
        &["--redis-pressure", "64"],
        &[
            "--redis-replica",
            "behind",
            "--redis-failover",
            "after-claim",
            "--redis-wait-ms",
            "50",
        ],
    ];
    let runs: Vec<Vec<&str>> = redis
        .iter()
        .map(|more| [&race[..], more, &["--work-ms", "1"]].concat())
        .collect();
    let runs: Vec<&[&str]> = runs.iter().map(Vec::as_slice).collect();
    matches_the_schema(&runs);
}

/// Every JSON line of every run is valid against the published schema.
fn matches_the_schema(runs: &[&[&str]]) {
    let validator = validator();
    for args in runs {
        let lines = json_lines(args);
        assert!(!lines.is_empty(), "{args:?}");
        for line in &lines {
            let errors: Vec<String> = validator
                .iter_errors(line)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{args:?}: {errors:#?}");
        }
    }
}

#[test]
fn the_schema_requires_every_field_the_readme_documents() {
    let readme = std::fs::read_to_string("docs/races.md").unwrap();
    let start = readme
        .find("- `--json` prints one JSON object per race")
        .unwrap();
    // The list of fields ends where the worker reports are mentioned.
    let paragraph =
        &readme[start..start + readme[start..].find("and every worker's report").unwrap()];
    let documented: Vec<&str> = paragraph
        .split('`')
        .skip(3) // the flag itself and the words before the list
        .step_by(2)
        .collect();
    assert!(documented.len() >= 10, "{documented:?}");
    let schema = schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in documented {
        assert!(
            required.contains(&field),
            "{field} is documented but not required"
        );
    }
}

#[test]
fn output_missing_a_documented_field_is_rejected() {
    let validator = validator();
    let line = json_lines(&["race", "--json", "--work-ms", "1"]).remove(0);
    for field in [
        "store",
        "wrong_replays",
        "loser_policy",
        "outcomes",
        "reports",
    ] {
        let mut broken = line.clone();
        broken.as_object_mut().unwrap().remove(field);
        assert!(!validator.is_valid(&broken), "{field} removed, still valid");
    }
    let mut broken = line.clone();
    broken["outcomes"]
        .as_object_mut()
        .unwrap()
        .remove("conflict");
    assert!(
        !validator.is_valid(&broken),
        "an outcome name removed, still valid"
    );
}

/// Every `"<field>"` enum in a published schema, as found anywhere in it.
fn enums_named<'a>(v: &'a Value, field: &str, found: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            for (name, value) in map {
                if name == field
                    && let Some(names) = value.get("enum")
                {
                    found.push(names);
                }
                enums_named(value, field, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| enums_named(v, field, found)),
        _ => {}
    }
}

/// The probe schema's release modes are the one list of modes (null where
/// no burst was sent).
#[test]
fn the_probe_schema_names_every_release_mode() {
    use idem::probe::Mode;
    let schema: Value =
        serde_json::from_str(include_str!("../../schemas/probe.schema.json")).unwrap();
    let mut modes: Vec<Value> = Mode::ALL
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    modes.sort_by_key(|m| m.to_string());
    let mut found = Vec::new();
    enums_named(&schema, "mode", &mut found);
    assert!(!found.is_empty(), "the probe schema names no mode");
    for names in found {
        let mut names: Vec<Value> = names
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| !n.is_null())
            .cloned()
            .collect();
        names.sort_by_key(|m| m.to_string());
        assert_eq!(names, modes);
    }
}

/// Every `"strategy"` enum in a published schema lists the registry's
/// strategies, in its order: a strategy added to idem is added to the
/// schemas, or this fails.
#[test]
fn the_schemas_name_every_strategy_in_the_registry() {
    use idem::strategy::StrategyKind;
    let registry: Vec<Value> = StrategyKind::NAMES
        .iter()
        .map(|n| Value::from(*n))
        .collect();
    for file in [
        "schemas/race-result.schema.json",
        "schemas/matrix.schema.json",
        "schemas/explore.schema.json",
    ] {
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let mut found = Vec::new();
        enums_named(&schema, "strategy", &mut found);
        assert!(!found.is_empty(), "{file} names no strategy");
        for names in found {
            assert_eq!(names.as_array().unwrap(), &registry, "{file}");
        }
    }
}
