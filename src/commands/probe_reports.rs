//! `--report`: the probe's verdicts written where a CI system reads them, through the one safe writer.

use anyhow::Result;

use crate::cli::wire_commands::ReportTo;
use crate::db::secret::hide_variables;
use crate::probe::judged::Endpoint;
use crate::report::ci;
use crate::report::status::Status;

/// Writes each report asked for. GitHub's needs its variables: without
/// `GITHUB_STEP_SUMMARY` there is no summary to append to, and without
/// `GITHUB_ACTIONS=true` no one reads annotations; each is then left out.
pub fn write(reports: &[ReportTo], endpoints: &[Endpoint]) -> Result<()> {
    for report in reports {
        match report {
            ReportTo::Junit(path) => {
                let xml = hide_variables(&ci::junit(endpoints));
                crate::files::write::replace(path, xml.as_bytes(), "--report junit:")?;
            }
            ReportTo::Github => {
                let summary = std::env::var_os("GITHUB_STEP_SUMMARY");
                let actions = std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true");
                if summary.is_none() && !actions {
                    eprintln!(
                        "note: --report github wrote nothing: GITHUB_STEP_SUMMARY is not set \
                         and GITHUB_ACTIONS is not true (outside GitHub Actions)"
                    );
                }
                if let Some(path) = summary {
                    let md = hide_variables(&ci::github_summary(endpoints));
                    crate::files::write::append(
                        std::path::Path::new(&path),
                        md.as_bytes(),
                        "GITHUB_STEP_SUMMARY",
                    )?;
                }
                if actions {
                    eprint!("{}", hide_variables(&ci::github_annotations(endpoints)));
                }
            }
        }
    }
    Ok(())
}

/// Refuses a report target idem would not write, before anything is sent:
/// a JUnit path, or for GitHub's report the `GITHUB_STEP_SUMMARY` it names,
/// that is a link, a directory, a FIFO or a device.
pub fn check(reports: &[ReportTo]) -> Result<()> {
    for report in reports {
        match report {
            ReportTo::Junit(path) => crate::files::write::check_target(path, "--report junit:")?,
            ReportTo::Github => {
                if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
                    let path = std::path::Path::new(&path);
                    crate::files::write::check_target(path, "GITHUB_STEP_SUMMARY")?;
                }
            }
        }
    }
    Ok(())
}

/// Writes the reports, then ends with the probe's one exit status
/// (`verdict`, the endpoints' own). A
/// report that could not be written once the probe ran (a full disk)
/// exits 4, as a probe that could not run does, so that CI never passes
/// without the report it asked for; a case that failed still exits 1,
/// and the report's error is said beside it.
pub fn finish(reports: &[ReportTo], endpoints: &[Endpoint], verdict: Result<()>) -> Result<()> {
    let Err(unwritten) = write(reports, endpoints) else {
        return verdict;
    };
    let unwritten = format!("the probe ran, but its report was not written: {unwritten:#}");
    match verdict {
        Err(failed) if Status::of(&failed) == Some(Status::Failed) => {
            eprintln!("error: {unwritten}");
            Err(failed)
        }
        _ => Err(Status::CouldNotRun.because(unwritten)),
    }
}
