//! `idem probe --plan`: every endpoint of an API from one file, one summary, one exit status, JUnit and GitHub reports, and `${VAR}` values never shown.

use crate::common::Sandbox;
use crate::common::app::Served;

/// A plan of two endpoints of two real apps: check-then-store, which
/// duplicates, and claim-work-complete, which holds; the second's URL and
/// database URL come from the environment (the first overrides the
/// default with its own database's URL).
fn plan(duplicating: &Served, holding: &Served) -> String {
    format!(
        r#"
[defaults]
data = '{{"user_id": 42, "amount": 10}}'
requests = 5
count_database_url = "${{IDEM_TEST_DB}}"

[[endpoint]]
name = "check-then-store"
url = "{}"
count_sql = "{}"
count_database_url = "{}"

[[endpoint]]
name = "claim first"
url = "${{IDEM_TEST_API}}/lessons/1/complete"
count_sql = "{}"
"#,
        duplicating.endpoint(),
        duplicating.field("count_sql"),
        duplicating.field("database_url"),
        holding.field("count_sql"),
    )
}

/// A JUnit suite: its name, tests, failures, and each case's name with
/// what it came to (pass, failure, skipped).
type Suite = (String, String, String, Vec<(String, &'static str)>);

/// The JUnit file's suites.
fn suites(xml: &str) -> Vec<Suite> {
    let doc = roxmltree::Document::parse(xml).expect("JUnit is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    root.children()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|s| {
            let cases = s
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .map(|c| {
                    let came = if c.children().any(|n| n.has_tag_name("failure")) {
                        "failure"
                    } else if c.children().any(|n| n.has_tag_name("skipped")) {
                        "skipped"
                    } else {
                        "pass"
                    };
                    (c.attribute("name").unwrap().to_string(), came)
                })
                .collect();
            let attr = |a: &str| s.attribute(a).unwrap().to_string();
            (attr("name"), attr("tests"), attr("failures"), cases)
        })
        .collect()
}

#[test]
fn a_plan_probes_every_endpoint_and_reports_one_status_junit_and_github() {
    let duplicating = Served::start("plan-dup", &["-s", "check-then-store"]);
    let holding = Served::start("plan-hold", &["-s", "claim-work-complete"]);
    let sandbox = Sandbox::new("probe-plan");
    std::fs::write(sandbox.dir.join("plan.toml"), plan(&duplicating, &holding)).unwrap();
    let holding_url = holding.field("url");
    let secret_db = holding.field("database_url");
    let summary = sandbox.dir.join("summary.md");
    let mut junits = Vec::new();
    for run in 0..2 {
        let junit = sandbox.dir.join(format!("probe-{run}.xml"));
        let out = sandbox
            .idem()
            .args(["probe", "--plan", "plan.toml", "--report"])
            .arg(format!("junit:{}", junit.display()))
            .args(["--report", "github"])
            .env("IDEM_TEST_API", holding_url.trim_end_matches('/'))
            .env("IDEM_TEST_DB", &secret_db)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_ACTIONS", "true")
            .current_dir(&sandbox.dir)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        );
        // One endpoint duplicated: the plan exits 1, naming it.
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(stdout.contains("the plan"), "{stdout}");
        assert!(stderr.contains("check-then-store"), "{stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("::error")).count(),
            1,
            "{stderr}"
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        for shown in [&stdout, &stderr, &xml] {
            assert!(
                !shown.contains(&secret_db),
                "a ${{VAR}} value was shown: {shown}"
            );
            assert!(
                !shown.contains(&holding_url),
                "a ${{VAR}} URL was shown: {shown}"
            );
        }
        assert!(
            stdout.contains("${IDEM_TEST_API}/lessons/1/complete"),
            "{stdout}"
        );
        junits.push(suites(&xml));
    }
    // The same verdicts give the same report.
    assert_eq!(junits[0], junits[1]);
    let suites = &junits[0];
    assert_eq!(suites.len(), 2);
    assert_eq!(
        (suites[0].0.as_str(), suites[0].2.as_str()),
        ("check-then-store", "1")
    );
    assert_eq!(
        suites[0].3,
        [("5 requests, one key".to_string(), "failure")]
    );
    assert_eq!(
        (suites[1].0.as_str(), suites[1].2.as_str()),
        ("claim first", "0")
    );
    // Two runs appended two summaries to GitHub's file.
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(md.matches("### idem probe").count(), 2, "{md}");
    assert!(!md.contains(&secret_db));
}

#[test]
fn a_bad_plan_is_refused_in_one_line_naming_where() {
    let sandbox = Sandbox::new("probe-plan-bad");
    let cases = [
        (
            "[[endpoint]]\nurl = \"http://127.0.0.1:1/\"\ncolour = 1\n",
            "line 3, column 1, endpoint http://127.0.0.1:1/: unknown key `colour`",
        ),
        (
            "[[endpoint]]\nurl = \"${IDEM_NOT_SET_ANYWHERE}\"\n",
            "endpoint ${IDEM_NOT_SET_ANYWHERE}: ${IDEM_NOT_SET_ANYWHERE} is not set",
        ),
        (
            "[[endpoint]]\nurl = \"http://127.0.0.1:1/\"\nrequests = 0\n",
            "plan.toml line 3, column 1, endpoint http://127.0.0.1:1/: invalid value '0' for '--requests",
        ),
        ("[defaults]\nrequests = 5\n", "missing field `endpoint`"),
    ];
    // A setting given beside --plan belongs in the plan.
    std::fs::write(
        sandbox.dir.join("plan.toml"),
        "[[endpoint]]\nurl = \"http://127.0.0.1:1/\"\n",
    )
    .unwrap();
    let out = sandbox
        .idem()
        .args(["probe", "--plan", "plan.toml", "--other-data", "{}"])
        .current_dir(&sandbox.dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("say the probe's settings in the plan"));
    for (text, said) in cases {
        std::fs::write(sandbox.dir.join("plan.toml"), text).unwrap();
        let out = sandbox
            .idem()
            .args(["probe", "--plan", "plan.toml"])
            .current_dir(&sandbox.dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
    }
}

/// Twelve endpoints that duplicate: GitHub gets ten `::error` annotations
/// and one `::notice` for the rest, as it shows no more; JUnit has all
/// twelve failures.
#[test]
fn github_annotations_stop_at_ten_and_say_how_many_more() {
    let duplicating = Served::start("plan-twelve", &["-s", "check-then-store"]);
    let sandbox = Sandbox::new("probe-plan-twelve");
    let mut plan = format!(
        "[defaults]\nurl = \"{}\"\ndata = '{{\"user_id\": 42, \"amount\": 10}}'\n\
         count_sql = \"{}\"\ncount_database_url = \"{}\"\n",
        duplicating.endpoint(),
        duplicating.field("count_sql"),
        duplicating.field("database_url"),
    );
    for i in 1..=12 {
        plan.push_str(&format!("\n[[endpoint]]\nname = \"award {i}\"\n"));
    }
    std::fs::write(sandbox.dir.join("plan.toml"), plan).unwrap();
    let out = sandbox
        .idem()
        .args(["probe", "--plan", "plan.toml", "--report", "github"])
        .args(["--report", "junit:twelve.xml"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", sandbox.dir.join("summary.md"))
        .current_dir(&sandbox.dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors = stderr.lines().filter(|l| l.starts_with("::error")).count();
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("::notice"))
        .collect();
    assert_eq!(errors, 10, "{stderr}");
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(notices[0].contains("2 more cases did not hold"), "{stderr}");
    let xml = std::fs::read_to_string(sandbox.dir.join("twelve.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(doc.root_element().attribute("failures"), Some("12"));
}

/// A plan whose key, table and whole database URL come from variables:
/// no value is shown in stdout, stderr, `--json`, JUnit or GitHub's
/// summary and annotations, in any case or form the value comes back in
/// (the server folds an unquoted table name to lower case; a refused URL
/// is named with its password hidden, its user, host and database not).
#[test]
fn no_variable_is_shown_in_any_output_in_any_form() {
    let holding = Served::start("plan-secrets", &["-s", "claim-work-complete"]);
    let sandbox = Sandbox::new("probe-plan-secrets");
    let (key, table) = ("Key-Secret-7731", "Tenant_Secret_5517");
    let url = "postgres://alice_secret:pw-secret-1@127.0.0.1:1/payments_live_db?sslmode=bogus";
    let secrets = [
        key,
        table,
        "alice_secret",
        "pw-secret-1",
        "payments_live_db",
    ];
    let plan = format!(
        "[defaults]\nurl = \"{}\"\ndata = '{{\"user_id\": 42, \"amount\": 10}}'\n\
         count_database_url = \"{}\"\n\n\
         [[endpoint]]\nname = \"keyed\"\nkey = \"${{PROBE_KEY}}\"\ncount_sql = \"{}\"\n\n\
         [[endpoint]]\nname = \"tenant\"\ncount_sql = \"SELECT count(*) FROM ${{TENANT_TABLE}}\"\n",
        holding.endpoint(),
        holding.field("database_url"),
        holding.field("count_sql"),
    );
    std::fs::write(sandbox.dir.join("plan.toml"), plan).unwrap();
    let (junit, summary) = (
        sandbox.dir.join("junit.xml"),
        sandbox.dir.join("summary.md"),
    );
    let run = |plan: &str, json: bool| {
        let mut command = sandbox.idem();
        command
            .args(["probe", "--plan", plan, "--report", "github", "--report"])
            .arg(format!("junit:{}", junit.display()))
            .env("PROBE_KEY", key)
            .env("TENANT_TABLE", table)
            .env("BAD_DB_URL", url)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_ACTIONS", "true")
            .current_dir(&sandbox.dir);
        if json {
            command.arg("--json");
        }
        command.output().unwrap()
    };
    let mut shown = Vec::new();
    for json in [false, true] {
        let out = run("plan.toml", json);
        // The tenant's count cannot be taken: that endpoint could not run.
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        shown.push(String::from_utf8_lossy(&out.stdout).to_string());
        shown.push(String::from_utf8_lossy(&out.stderr).to_string());
    }
    assert!(shown[1].contains("${TENANT_TABLE}"), "{}", shown[1]);
    assert!(
        shown[2].contains("${PROBE_KEY}"),
        "the JSON names the variable"
    );
    shown.push(std::fs::read_to_string(&junit).unwrap());
    shown.push(std::fs::read_to_string(&summary).unwrap());
    // A whole URL from a variable, refused for its parameter.
    std::fs::write(
        sandbox.dir.join("bad-url.toml"),
        format!(
            "[[endpoint]]\nurl = \"{}\"\ncount_sql = \"SELECT 1\"\n\
             count_database_url = \"${{BAD_DB_URL}}\"\n",
            holding.endpoint()
        ),
    )
    .unwrap();
    let out = run("bad-url.toml", false);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("${BAD_DB_URL}"), "{stderr}");
    shown.push(stderr);
    for text in &shown {
        let lower = text.to_lowercase();
        for secret in secrets {
            assert!(
                !lower.contains(&secret.to_lowercase()),
                "{secret} was shown: {text}"
            );
        }
    }
}
