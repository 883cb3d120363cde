//! `idem challenge --starter ruby`: the course's plain-Ruby challenge without a clone: the starting point written into the current folder, never over a file, with the two commands that run and judge it.

use std::path::Path;

use anyhow::{Result, bail};

use super::command::{Command, Given, Needs, Nothing};
use crate::cli::wire_commands::Starter;
use crate::report::emit;
use crate::report::style::strong;
use crate::report::width::{shell_lines, width};

/// The Ruby starting point: the award as a small web app, check-then-store.
const RUBY: &str = include_str!("../../examples/ruby/app.rb");

/// What `--starter` writes, and where.
pub struct Written {
    pub language: Starter,
}

impl Command for Written {
    type On = Nothing;

    fn needs(&self) -> Needs<()> {
        Needs::on(())
    }

    async fn run(self, _: &Nothing, _: Given) -> Result<()> {
        let (name, text) = match self.language {
            Starter::Ruby => ("app.rb", RUBY),
        };
        if !crate::files::write::create_new(Path::new(name), text.as_bytes(), "the starter")? {
            bail!(
                "{name} is already here, and idem never writes over a file: move it, or run \
                 this in another folder"
            );
        }
        let run = "PORT=4567 idem db -- ruby app.rb";
        let judge = "idem challenge --url http://127.0.0.1:4567/lessons/1/complete \
                     --count-sql 'SELECT count(*) FROM experience_points' \
                     --count-database-url \"$DATABASE_URL\"";
        emit(&format!(
            "{}\n\
             The course's award as a small web app, guarded the naive way (check-then-store):\n\
             make it pass the challenge's cases. It needs ruby and the pg gem (Debian: ruby \
             ruby-pg ruby-webrick).\n\n\
             Run it on a disposable database of its own (idem db prints the DATABASE_URL it made):\n{}\n\n\
             Then, in another terminal, with DATABASE_URL set to the URL it printed, judge it:\n{}\n",
            strong(format!("wrote {name}")),
            shell_lines(run, width()),
            shell_lines(judge, width())
        ))
    }
}
