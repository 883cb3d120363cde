//! An idem command line parsed as idem parses it, and no further: the docs'
//! blocks that need a service of yours or a terminal are checked this far by
//! tests/it/docs.rs. Built by `cargo test`; exits 0, or 2 with clap's error.

use std::process::ExitCode;

use clap::Parser;
use idem::cli::Cli;

fn main() -> ExitCode {
    match Cli::try_parse() {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", err.render());
            ExitCode::from(2)
        }
    }
}
