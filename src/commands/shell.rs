//! `idem completions SHELL` and `idem man`: the shell's side of idem, made from the same clap definitions as its parser.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;
use crate::files::write;

/// Writes the completion script for `shell` to standard output; with
/// `dir`, into that directory (made if missing) under the name the shell
/// looks for there (`idem.bash`, `_idem`, `idem.fish`, ...).
pub fn completions(shell: clap_complete::Shell, dir: Option<&Path>) -> Result<()> {
    let Some(dir) = dir else {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "idem", &mut script);
        return written(&script);
    };
    made(dir)?;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "idem", &mut script);
    let path = dir.join(clap_complete::Generator::file_name(&shell, "idem"));
    write::replace(&path, &script, "the completion script")?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// `dir`, made if missing (see [`write::make_dirs`]).
fn made(dir: &Path) -> Result<()> {
    write::make_dirs(dir, 0o755, "--dir")
}

/// Writes idem's man page, in roff: `idem.1` to standard output, whose
/// COMMANDS section names every command; with `dir`, `idem.1` and a page per
/// command (`idem-race.1`, ...) into that directory (made if missing)
/// instead.
pub fn man(dir: Option<&Path>) -> Result<()> {
    let top = Cli::command();
    let Some(dir) = dir else {
        return written(&page(clap_mangen::Man::new(top))?);
    };
    made(dir)?;
    let subs: Vec<clap::Command> = top
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut pages = vec![("idem.1".to_string(), page(clap_mangen::Man::new(top))?)];
    for sub in subs {
        let name = format!("idem-{}", sub.get_name());
        let man = clap_mangen::Man::new(sub).title(name.to_uppercase());
        pages.push((format!("{name}.1"), page(man)?));
    }
    for (file, text) in &pages {
        write::replace(&dir.join(file), text, "the man page")?;
    }
    eprintln!("wrote {} man pages to {}", pages.len(), dir.display());
    Ok(())
}

/// One command's page.
fn page(man: clap_mangen::Man) -> Result<Vec<u8>> {
    let mut page = Vec::new();
    man.render(&mut page)
        .context("could not render the man page")?;
    Ok(page)
}

/// `bytes` on standard output; a reader that went away (`| head`) is not an error.
fn written(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("could not write to standard output"),
    }
}
