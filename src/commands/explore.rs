//! `idem explore`: the guard under every interleaving of its requests' steps, held or failed in each, and the shortest failing one to replay.

use std::ffi::OsString;

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs};
use crate::cli::race::ExploreArgs;
use crate::db::mariadb::{Mariadb, MariadbOptions};
use crate::db::secret::redact;
use crate::db::{ConnectOptions, Database};
use crate::explore;
use crate::race::RaceSettings;
use crate::race::engine::Engine;
use crate::race::mariadb::MariadbRace;
use crate::report::{self, Output};

pub struct Plan {
    db: ConnectOptions,
    settings: RaceSettings,
    walking: explore::Walking,
    pub(crate) out: Output,
}

/// The same exploration on MariaDB.
pub struct OnMariadb {
    options: MariadbOptions,
    race: MariadbRace,
    walking: explore::Walking,
    out: Output,
}

/// An exploration on the engine `--engine` names.
pub enum Planned {
    Postgres(Box<Plan>),
    Mariadb(Box<OnMariadb>),
}

pub fn plan(args: &ExploreArgs) -> Result<Planned> {
    let input = args
        .input
        .clone()
        .with(|r| r.strategy.strategy = args.strategy.strategy);
    let out = Output::from_json_flag(args.json);
    if args.engine == Engine::Mariadb {
        let race = MariadbRace::stepped_from_input(&explore::input_of(&input))?;
        let walking = walking(args, race.settings());
        return Ok(Planned::Mariadb(Box::new(OnMariadb {
            options: args.connect.mariadb_for(race.cluster.nodes)?,
            race,
            walking,
            out,
        })));
    }
    let settings = explore::settings(&input)?;
    Ok(Planned::Postgres(Box::new(Plan {
        db: args.connect.with_standby(&args.input.standby)?,
        walking: walking(args, &settings),
        settings,
        out,
    })))
}

/// How `args` ask to walk the race `settings` describe.
fn walking(args: &ExploreArgs, settings: &RaceSettings) -> explore::Walking {
    explore::Walking {
        bound: args.max_interleavings.unwrap_or(explore::DEFAULT_BOUND),
        branches: explore::Branches {
            crashes: args.crashes,
            clock: args.clock,
        },
        replay: replay_command(std::env::args_os().collect(), settings),
    }
}

impl Command for Plan {
    type On = Database;

    fn needs(&self) -> Needs<ConnectOptions> {
        Needs::on(self.db.clone()).verdict()
    }

    async fn run(self, db: &Database, _: Given) -> Result<()> {
        let progress = report::progress::counter(!self.out.for_people(), "interleavings");
        let found = explore::explore(db, self.settings, &self.walking, |n| {
            progress.set_position(n)
        })
        .await;
        progress.finish_and_clear();
        shown(found?, self.out)
    }
}

impl Command for OnMariadb {
    type On = Mariadb;

    fn needs(&self) -> Needs<MariadbOptions> {
        Needs::on(self.options.clone()).verdict()
    }

    async fn run(self, db: &Mariadb, _: Given) -> Result<()> {
        let progress = report::progress::counter(!self.out.for_people(), "interleavings");
        let found =
            explore::explore_mariadb(db, &self.race, &self.walking, |n| progress.set_position(n))
                .await;
        progress.finish_and_clear();
        shown(found?, self.out)
    }
}

/// Shows what an exploration found, and the shortest failing interleaving
/// drawn; a guard that failed in any is the exit's verdict.
fn shown(found: explore::Exploration, out: Output) -> Result<()> {
    out.record(&found, report::explore::render)?;
    if let Some(race) = &found.shortest_race {
        out.text(|| report::explore::render_shortest(&found))?;
        match race {
            explore::Ran::Postgres(race) => {
                let shown = report::timeline::Shown {
                    axis: report::timeline::Axis::StepOrder,
                    sql: false,
                };
                out.text(|| format!("\n{}", report::race::render(race)))?;
                out.text(|| report::timeline::render_with(race, shown))?;
            }
            explore::Ran::Mariadb(race) => {
                out.text(|| format!("\n{}", report::engine::render(race)))?;
                out.text(|| report::engine::render_steps(race, false))?;
            }
        }
    }
    if found.failing > 0 {
        bail!(
            "the guard failed in {} of {} interleavings",
            found.failing,
            found.interleavings
        );
    }
    Ok(())
}

/// The `idem step` command line that replays this exploration's races:
/// the arguments given to `idem explore`, less its own, with the workers
/// and the work's length said, each quoted for a shell.
fn replay_command(argv: Vec<OsString>, settings: &RaceSettings) -> String {
    let args: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().to_string())
        .collect();
    let after = args
        .iter()
        .position(|a| a == "explore")
        .map_or(args.len(), |i| i + 1);
    let mut kept = Vec::new();
    let mut rest = args[after..].iter();
    let (mut workers_said, mut work_said) = (false, false);
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--json" | "--crashes" | "--clock" => {}
            "--max-interleavings" => {
                rest.next();
            }
            a if a.starts_with("--max-interleavings=") => {}
            // A URL's password is never printed: the replay names the
            // server with it hidden, for the user to put back.
            "--database-url" => {
                if let Some(url) = rest.next() {
                    kept.push(format!("--database-url {}", quoted(&redact(url))));
                }
            }
            a if a.starts_with("--database-url=") => {
                let url = &a["--database-url=".len()..];
                kept.push(format!("--database-url {}", quoted(&redact(url))));
            }
            a => {
                workers_said |= a == "-w" || a == "--workers" || a.starts_with("--workers=");
                work_said |= a == "--work-ms" || a.starts_with("--work-ms=");
                kept.push(quoted(a));
            }
        }
    }
    if !workers_said {
        kept.push(format!("--workers {}", settings.requests().workers()));
    }
    if !work_said {
        kept.push(format!("--work-ms {}", settings.work_ms()));
    }
    format!("idem step {}", kept.join(" "))
}

/// `arg` as a POSIX shell reads it back: as it is when it is plain,
/// single-quoted otherwise.
fn quoted(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:@+".contains(c));
    match plain {
        true => arg.to_string(),
        false => format!("'{}'", arg.replace('\'', "'\\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_replay_keeps_the_race_and_drops_what_only_explore_takes() {
        let input = crate::race::options::RaceInput::default();
        let settings = explore::settings(&input).unwrap();
        let line = replay_command(
            argv(&[
                "idem",
                "--color",
                "never",
                "explore",
                "-s",
                "guard",
                "--json",
                "--max-interleavings",
                "9",
            ]),
            &settings,
        );
        assert_eq!(line, "idem step -s guard --workers 2 --work-ms 0");
        let line = replay_command(
            argv(&[
                "idem",
                "explore",
                "--strategy-file",
                "my guard.toml",
                "-w",
                "3",
                "--work-ms",
                "5",
            ]),
            &settings,
        );
        assert_eq!(
            line,
            "idem step --strategy-file 'my guard.toml' -w 3 --work-ms 5"
        );
        let line = replay_command(
            argv(&[
                "idem",
                "explore",
                "--database-url",
                "mysql://u:pw@h/d",
                "--database-url=postgres://u:pw@h/d",
            ]),
            &settings,
        );
        assert_eq!(
            line,
            "idem step --database-url 'mysql://u:***@h/d' --database-url \
             'postgres://u:***@h/d' --workers 2 --work-ms 0"
        );
    }
}
