//! `idem scenario list|run`: the demonstrations as files, checked against their expected figures.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::command::{Command, Given, Needs, Nothing};
use crate::cli::teaching::{ScenarioArgs, ScenarioCommand};
use crate::db::{ConnectOptions, Database};
use crate::race::engine::{Engine, Engines};
use crate::report::style::{bad, dim, good, strong};
use crate::report::{Output, emit};
use crate::scenario::{self, Scenario, builtin};

/// Loads the scenarios named (files, folders, or built-in scenarios by
/// name), or all the built-in ones.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Scenario>> {
    if paths.is_empty() {
        return builtin::all();
    }
    let mut scenarios = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("could not read {}", path.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            inside.sort();
            for file in inside {
                scenarios.push(read(&file)?);
            }
        } else if path.exists() {
            scenarios.push(read(path)?);
        } else {
            match builtin::named(&path.to_string_lossy()) {
                Some(scenario) => scenarios.push(scenario?),
                None => bail!(
                    "{}: no such file, and no built-in scenario of that name (`idem scenario list` names them)",
                    path.display()
                ),
            }
        }
    }
    Ok(scenarios)
}

fn read(path: &Path) -> Result<Scenario> {
    let bytes =
        crate::files::read_regular(path, crate::files::MAX_SCENARIO_BYTES, "scenario file")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("scenario file {} is not UTF-8 text", path.display()))?;
    scenario::parse(path, &text)
}

/// `idem scenario list` or `run`, its files read and checked.
pub enum Planned {
    List(Listed),
    Run(Box<Ran>),
}

/// The scenarios to list.
pub struct Listed(Vec<Scenario>);

/// The scenarios to run, each against its expectation.
pub struct Ran {
    scenarios: Vec<Scenario>,
    out: Output,
    /// Paged on a terminal (unless `--no-pager` or `--json`).
    page: bool,
    /// The engines asked for: a MariaDB that cannot start says how to
    /// leave it out, unless it was asked for.
    engines: Engines,
    db: ConnectOptions,
}

/// Checks the files before any database starts.
pub fn plan(args: &ScenarioArgs, page: bool) -> Result<Planned> {
    let engines = args.engine.engines();
    Ok(match &args.command {
        ScenarioCommand::List { paths } => {
            Planned::List(Listed(on(load(paths)?, paths, &engines)?))
        }
        ScenarioCommand::Run { paths, json } => Planned::Run(Box::new(Ran {
            scenarios: on(load(paths)?, paths, &engines)?,
            out: Output::from_json_flag(*json),
            page: page && !json,
            engines,
            db: args.connect.options(),
        })),
    })
}

/// The scenarios on the engines asked for (`--engine`). One named by the
/// learner on another engine is refused: its expected figures are its own
/// engine's, and a race on this one could not be held to them.
fn on(mut scenarios: Vec<Scenario>, named: &[PathBuf], engines: &Engines) -> Result<Vec<Scenario>> {
    if let Some(other) = scenarios
        .iter()
        .find(|s| !engines.takes(s.engine) && !named.is_empty())
    {
        let twin = other.engine == Engine::Postgres;
        let twin = match builtin::named(&format!("{}-on-innodb", super::lesson::name_of(other))) {
            Some(_) if twin => format!(
                "; its twin on InnoDB is {}-on-innodb",
                super::lesson::name_of(other)
            ),
            _ => String::new(),
        };
        bail!(
            "{} is written for {}, and its expected figures are that engine's, not {}'s{twin}",
            other.source,
            other.engine.spec().server,
            engines.said()
        );
    }
    scenarios.retain(|s| engines.takes(s.engine));
    if scenarios.is_empty() {
        bail!("no built-in scenario runs on {}", engines.said());
    }
    Ok(scenarios)
}

impl Command for Listed {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        list(&self.0)
    }
}

impl Command for Ran {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone()).paged(self.page).verdict()
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        run(self.scenarios, (self.out, &self.engines), db).await
    }
}

/// The scenarios in lesson order (10 after 9), each by the name `idem
/// scenario run` takes, whole, with its title below it.
fn list(scenarios: &[Scenario]) -> Result<()> {
    let mut sorted: Vec<&Scenario> = scenarios.iter().collect();
    sorted.sort_by_key(|s| s.lesson);
    let mut out = String::new();
    let mut lesson = None;
    for s in sorted {
        if lesson != Some(s.lesson) {
            lesson = Some(s.lesson);
            out.push_str(&format!("{}\n", strong(format!("Lesson {}", s.lesson))));
        }
        out.push_str(&format!(
            "  {}\n      {}\n",
            super::lesson::name_of(s),
            dim(&s.title)
        ));
    }
    out.push_str(&format!(
        "\n{}\n",
        dim("run one with `idem scenario run NAME`, all with `idem scenario run`")
    ));
    emit(&out)
}

async fn run(
    scenarios: Vec<Scenario>,
    (out, engines): (Output, &Engines),
    db: &Database,
) -> Result<()> {
    let mut failed = Vec::new();
    let mut skipped = 0;
    for s in &scenarios {
        let verdict = scenario::run(db, s)
            .await
            .map_err(|e| super::lesson::unless_left_out(e, s, engines))?;
        out.record(&verdict, crate::report::scenario::render_verdict)?;
        if verdict.skipped.is_some() {
            skipped += 1;
        } else if !verdict.passed() {
            failed.push(s.source.clone());
        }
    }
    out.text(|| {
        let ran = scenarios.len() - skipped;
        let passed = ran - failed.len();
        let mut line = format!("{passed} of {ran} scenarios show their expected figures");
        if skipped > 0 {
            line.push_str(&format!(" ({skipped} skipped)"));
        }
        let line = if failed.is_empty() {
            good(line)
        } else {
            bad(line)
        };
        let mut text = format!("\n{}\n", strong(line.to_string()));
        if !failed.is_empty() {
            text.push_str(&format!(
                "{}\n",
                dim(format!("differing: {}", failed.join(", ")))
            ));
        }
        text
    })?;
    if !failed.is_empty() {
        bail!(
            "{} scenario(s) differ from their expected figures",
            failed.len()
        );
    }
    Ok(())
}
