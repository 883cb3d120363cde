//! `idem probe --plan FILE`: every endpoint of an API probed in turn, from one file, ending with one summary.
//!
//! A plan is TOML: `[defaults]` for what the endpoints share, and an
//! `[[endpoint]]` table for each, with a `name`, a `url`, and any of the
//! probe's flags as keys (`requests`, `conformance = true`, `count_sql`,
//! `headers = ["Authorization: Bearer ${TOKEN}"]`, ...). Each endpoint is
//! turned into the command line it stands for and read by the same parser
//! as `idem probe URL`, so a plan can say nothing a command line cannot.
//! `${VAR}` is read from the environment, and a value read so is never
//! shown: the URL is shown as written, and every message has the value
//! replaced by its `${VAR}` again.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use clap::Parser;
use toml::Spanned;

use super::command::{Command, Given, Needs, Nothing};
use super::probe::{Plan, endpoint, exit_status};
use crate::cli::wire_commands::{ProbeArgs, ReportTo};
use crate::files::{line_at, parse_toml, read_text};
use crate::probe::judged::Endpoint;
use crate::report::Output;

/// The largest plan file read.
pub const MAX_PLAN_BYTES: u64 = 256 * 1024;

/// The most endpoints one plan probes.
pub const MOST_ENDPOINTS: usize = 100;

/// The keys an endpoint (or `[defaults]`) may have: the probe's flags,
/// `_` for `-`, and `name`, `url`, `headers`, `data_file`.
const KEYS: [&str; 27] = [
    "name",
    "url",
    "method",
    "headers",
    "data",
    "data_file",
    "other_data",
    "other_caller",
    "other_url",
    "requests",
    "runs",
    "key",
    "conformance",
    "retry_at",
    "in_flight_ms",
    "settle_ms",
    "timeout_ms",
    "max_response_bytes",
    "count_sql",
    "count_database_url",
    "count_cmd",
    "count_timeout_ms",
    "insecure",
    "wait_for_ms",
    "sink",
    "sink_status",
    "sink_delay_ms",
];

/// The plan as TOML says it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    defaults: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    endpoint: Vec<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
}

/// One command line, parsed as `idem probe`'s.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct One {
    #[command(flatten)]
    args: ProbeArgs,
}

/// Values read from the environment, to be kept out of every message.
#[derive(Default)]
pub struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// `text` with every secret value written as its `${VAR}` again, in
    /// any form it comes back in (see [`crate::db::secret::hide_variable`]).
    pub fn redact(&self, text: &str) -> String {
        let text = self
            .0
            .iter()
            .filter(|(value, _)| !value.is_empty())
            .fold(text.to_string(), |t, (value, name)| t.replace(value, name));
        crate::db::secret::hide_variables(&text)
    }
}

/// Every endpoint's probe, checked before anything is sent.
pub struct PlanRun {
    endpoints: Vec<(String, Plan)>,
    secrets: Secrets,
    reports: Vec<ReportTo>,
    out: Output,
}

/// Reads the plan at `file`; the command line may add only `--json`,
/// `--report`, and `--wait-for-ms` for every endpoint that does not say.
pub fn plan(args: &ProbeArgs, file: &Path) -> Result<PlanRun> {
    let given_too = !args.headers.is_empty()
        || args.data.is_some()
        || args.conformance
        || !args.retry_at.is_empty()
        || args.requests.is_some()
        || args.key.is_some()
        || args.count.count_sql.is_some()
        || args.count.count_cmd.is_some()
        || args.count.count_database_url.is_some()
        || args.count.sink.is_some()
        || args.other_data.is_some()
        || !args.other_caller.is_empty()
        || args.other_url.is_some()
        || args.in_flight_ms.is_some();
    if given_too {
        bail!("with --plan, say the probe's settings in the plan (its [defaults] or an endpoint)");
    }
    let name = file.display().to_string();
    let text = read_text(file, MAX_PLAN_BYTES, "plan")?;
    let raw: Raw = parse_toml(&name, &text)?;
    if raw.endpoint.is_empty() || raw.endpoint.len() > MOST_ENDPOINTS {
        bail!("{name}: a plan names 1 to {MOST_ENDPOINTS} [[endpoint]] tables");
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut secrets = Secrets::default();
    let mut endpoints = Vec::new();
    for (i, table) in raw.endpoint.iter().enumerate() {
        let mut merged = raw.defaults.clone();
        for (key, value) in table {
            merged.insert(key.clone(), value.clone());
        }
        let at = |span: std::ops::Range<usize>| position(&text, span.start);
        let (shown, argv, raw_url) = command_line(&merged, dir, &mut secrets, &name, &at)
            .map_err(|e| in_endpoint(&e, &label(table, i)))?;
        let place = format!("{name}, endpoint {shown}");
        let one = One::try_parse_from(&argv).map_err(|e| {
            let said = e.to_string();
            let first = said.lines().next().unwrap_or_default();
            // Named where the key it is about stands in the plan.
            let key = merged
                .keys()
                .find(|k| first.contains(&format!("'{}", flag_of(k.get_ref()))));
            let place = match key {
                Some(k) => format!("{name} {}, endpoint {shown}", at(k.span())),
                None => place.clone(),
            };
            anyhow!(
                "{place}: {}",
                secrets.redact(first.trim_start_matches("error: "))
            )
        })?;
        let mut probe = super::probe::plan(&one.args)
            .map_err(|e| anyhow!("{place}: {}", secrets.redact(&format!("{e:#}"))))?;
        probe.out = Output::from_json_flag(args.json);
        probe.probe.shown_url = raw_url;
        if probe.wait_for.is_none() {
            probe.wait_for = args.wait_for_ms.map(std::time::Duration::from_millis);
        }
        endpoints.push((shown, probe));
    }
    // "another endpoint" sends the same key to the next endpoint of the plan.
    let n = endpoints.len();
    for i in (0..n).filter(|_| n > 1) {
        let (_, plan) = &endpoints[i];
        if plan.conformance.is_some() && plan.other_endpoint.is_none() {
            let next = endpoints[(i + 1) % n].1.probe.clone();
            endpoints[i].1.other_endpoint = Some(next);
        }
    }
    Ok(PlanRun {
        endpoints,
        secrets,
        reports: args.report.clone(),
        out: Output::from_json_flag(args.json),
    })
}

/// The endpoint's name, the command line it stands for, and its URL as
/// written (`${VAR}` and all, to be shown).
fn command_line(
    table: &BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    dir: &Path,
    secrets: &mut Secrets,
    file: &str,
    at: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<(String, Vec<String>, String)> {
    let mut argv = Vec::new();
    let (mut name, mut url) = (None, None);
    for (key, value) in table {
        let line = at(key.span());
        let k = key.get_ref().as_str();
        if !KEYS.contains(&k) {
            bail!(
                "{file} {line}: unknown key `{k}`; an endpoint's keys are {}",
                KEYS.join(", ")
            );
        }
        let texts = texts(value.get_ref()).ok_or_else(|| {
            anyhow!(
                "{file} {line}: `{k}` must be a string, a number, true or false, or a list of strings"
            )
        })?;
        let flag = flag_of(k);
        match (k, value.get_ref()) {
            ("name", _) => name = texts.first().cloned(),
            ("url", _) => {
                let raw = texts.first().cloned().unwrap_or_default();
                argv.push(expand(&raw, secrets, file, &line)?);
                url = Some(raw);
            }
            (_, toml::Value::Boolean(true)) => argv.push(flag),
            (_, toml::Value::Boolean(false)) => {}
            _ => {
                for text in texts {
                    let text = expand(&text, secrets, file, &line)?;
                    argv.push(flag.clone());
                    argv.push(match k {
                        "data_file" => format!("@{}", dir.join(text).display()),
                        _ => text,
                    });
                }
            }
        }
    }
    let Some(url) = url else {
        bail!("{file}: every endpoint needs a url");
    };
    let name = name.unwrap_or_else(|| url.clone());
    Ok((name, argv, url))
}

/// An endpoint as a message names it before its command line is read: its
/// `name`, else its `url` as written (`${VAR}` and all), else its place.
fn label(table: &BTreeMap<Spanned<String>, Spanned<toml::Value>>, i: usize) -> String {
    let text = |key: &str| {
        table
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .and_then(|(_, v)| v.get_ref().as_str().map(str::to_owned))
    };
    text("name")
        .or_else(|| text("url"))
        .unwrap_or_else(|| format!("number {}", i + 1))
}

/// `err`, a plan's error at `FILE LINE: why`, with the endpoint it is in.
fn in_endpoint(err: &anyhow::Error, endpoint: &str) -> anyhow::Error {
    let said = err.to_string();
    match said.split_once(": ") {
        Some((place, why)) => anyhow!("{place}, endpoint {endpoint}: {why}"),
        None => anyhow!("{said} (endpoint {endpoint})"),
    }
}

/// The flag a plan's key stands for: `retry_at` is `--retry-at`, and
/// `headers` and `data_file` are `--header` and `--data`.
fn flag_of(key: &str) -> String {
    match key {
        "headers" => "--header".to_string(),
        "data_file" => "--data".to_string(),
        _ => format!("--{}", key.replace('_', "-")),
    }
}

/// "line 3, column 1": where byte `at` of `text` stands.
fn position(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let column = before.chars().rev().take_while(|c| *c != '\n').count() + 1;
    format!("line {}, column {column}", line_at(text, at))
}

/// A value's texts: itself, or each item of a list of strings.
fn texts(value: &toml::Value) -> Option<Vec<String>> {
    match value {
        toml::Value::String(s) => Some(vec![s.clone()]),
        toml::Value::Integer(n) => Some(vec![n.to_string()]),
        toml::Value::Boolean(b) => Some(vec![b.to_string()]),
        toml::Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => None,
    }
}

/// `text` with each `${VAR}` read from the environment, remembered as a secret.
fn expand(text: &str, secrets: &mut Secrets, file: &str, line: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start + 2..].find('}') else {
            bail!("{file} {line}: a ${{ without its }}");
        };
        let var = &rest[start + 2..start + 2 + len];
        let value = std::env::var(var)
            .map_err(|_| anyhow!("{file} {line}: ${{{var}}} is not set in the environment"))?;
        crate::db::secret::hide_variable(&value, &format!("${{{var}}}"));
        secrets.0.push((value.clone(), format!("${{{var}}}")));
        out.push_str(&value);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Command for PlanRun {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(()).verdict()
    }

    /// Each endpoint in turn, under a heading, then the summary, the
    /// reports and the one exit status.
    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let total = self.endpoints.len();
        let mut judged: Vec<Endpoint> = Vec::with_capacity(total);
        for (i, (name, plan)) in self.endpoints.iter().enumerate() {
            self.out
                .text(|| format!("\n── endpoint {name} ({} of {total}) ──\n", i + 1))?;
            let mut e = endpoint(name.clone(), plan.judge().await);
            self.redact(&mut e);
            if let Some(why) = &e.could_not_run {
                self.out.text(|| format!("could not probe it: {why}\n"))?;
            }
            judged.push(e);
        }
        self.out.record(
            &Summary {
                plan: true,
                endpoints: &judged,
            },
            |s| crate::report::probe::render_plan(s.endpoints),
        )?;
        super::probe_reports::finish(&self.reports, &judged, exit_status(&judged))
    }
}

impl PlanRun {
    fn redact(&self, e: &mut Endpoint) {
        for case in &mut e.cases {
            case.saw = self.secrets.redact(&case.saw);
        }
        e.could_not_run = e.could_not_run.as_deref().map(|w| self.secrets.redact(w));
    }
}

/// The last line of `--json` for a plan.
#[derive(serde::Serialize)]
struct Summary<'a> {
    plan: bool,
    endpoints: &'a [Endpoint],
}
