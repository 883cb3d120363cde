//! The program around the commands: a one-line error for anything that goes wrong, the async runtime, the exit status.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use colored::Colorize;

use crate::cli::Cli;
use crate::commands::db::ExitWith;
use crate::controls::escaped;
use crate::db::secret::scrub;
use crate::report::BrokenPipe;
use crate::report::status::{Ended, Status};
use crate::signals::Interrupted;

/// The whole program: parse the command line, run it, print any error on
/// one line, and say how it ended (0, 1, 2 for bad arguments, the probe's
/// 3 and 4 (see [`crate::commands::status`]), 128 + a signal's number).
pub fn main() -> ExitCode {
    // A bug must still read as one line, not a backtrace; the run's cleanup
    // goes on as for any other error.
    std::panic::set_hook(Box::new(one_line_panic));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            err.exit()
        }
        Err(err) if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
        Err(err) => {
            eprintln!("{}", on_stderr(&bad_arguments(&err)));
            return ExitCode::from(Status::BadInput.code());
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!(
                "{} could not start the async runtime: {err}",
                "error:".red().bold()
            );
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(crate::run(cli));
    drop(runtime);
    // `idem db -- COMMAND`: the command has said what went wrong.
    let passed_on = outcome
        .as_ref()
        .err()
        .and_then(|e| e.downcast_ref::<ExitWith>());
    if let Some(exit) = passed_on {
        return ExitCode::from(exit.code);
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<BrokenPipe>() => ExitCode::SUCCESS,
        Err(err) => {
            // What a file or a server said reaches the terminal as text.
            let said = scrub(&crate::controls::causes_once(&err));
            let line = format!("{} {}", "error:".red().bold(), escaped(&said));
            eprintln!("{}", on_stderr(&line));
            if let Some(ended) = err.downcast_ref::<Ended>() {
                return ExitCode::from(ended.status.code());
            }
            match err.downcast_ref::<Interrupted>() {
                Some(signal) => ExitCode::from(128 + signal.number as u8),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// An error line as the terminal shows it: wrapped at spaces to its width,
/// continued lines indented; one line as it is for a file or a pipe.
fn on_stderr(line: &str) -> String {
    match crate::report::width::stderr_width() {
        Some(width) => {
            let fitted = crate::report::width::fit(&format!("  {line}"), width);
            fitted.strip_prefix("  ").unwrap_or(&fitted).to_string()
        }
        None => line.to_string(),
    }
}

/// A panic as one line, with where it happened: a bug must still read as
/// one line, not a backtrace.
fn one_line_panic(info: &std::panic::PanicHookInfo) {
    let place = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let message = scrub(&message);
    let message = escaped(&message);
    eprintln!("idem: internal error{place}: {message} (please report it)");
}

/// clap's complaint in one line: its first line says what is wrong, with
/// the arguments or values it lists below it; the usage is one `--help` away.
fn bad_arguments(err: &clap::Error) -> String {
    // clap's first line says what is wrong; the usage it adds is one `--help` away.
    let text = err.to_string();
    let mut first = text
        .lines()
        .next()
        .unwrap_or("invalid arguments")
        .to_string();
    // "...were not provided:" names them on the lines below.
    if first.ends_with(':') {
        let named: Vec<&str> = text
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        first = format!("{} {}", first, named.join(", "));
    }
    let line = |starts: &str| text.lines().map(str::trim).find(|l| l.starts_with(starts));
    // "tip: a similar argument exists: '--workers'": the fix for a typo.
    let tip = line("tip: ").map(|tip| format!("; {}", &tip["tip: ".len()..]));
    let first = first + tip.as_deref().unwrap_or_default();
    match line("[possible values") {
        Some(choices) => format!("{first} {choices}"),
        None => format!("{first} (see --help)"),
    }
}
