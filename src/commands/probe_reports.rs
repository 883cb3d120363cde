//! `--report`: the probe's verdicts written where a CI system reads them, through the one safe writer.

use anyhow::Result;

use crate::cli::wire_commands::ReportTo;
use crate::probe::judged::Endpoint;
use crate::report::ci;

/// Writes each report asked for. GitHub's needs its variables: without
/// `GITHUB_STEP_SUMMARY` there is no summary to append to, and without
/// `GITHUB_ACTIONS=true` no one reads annotations; each is then left out.
pub fn write(reports: &[ReportTo], endpoints: &[Endpoint]) -> Result<()> {
    for report in reports {
        match report {
            ReportTo::Junit(path) => {
                let xml = ci::junit(endpoints);
                crate::files::write::replace(path, xml.as_bytes(), "--report junit:")?;
            }
            ReportTo::Github => {
                if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
                    let md = ci::github_summary(endpoints);
                    crate::files::write::append(
                        std::path::Path::new(&path),
                        md.as_bytes(),
                        "GITHUB_STEP_SUMMARY",
                    )?;
                }
                if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
                    eprint!("{}", ci::github_annotations(endpoints));
                }
            }
        }
    }
    Ok(())
}

/// Refuses a report target idem would not write, before anything is sent.
pub fn check(reports: &[ReportTo]) -> Result<()> {
    for report in reports {
        if let ReportTo::Junit(path) = report {
            crate::files::write::check_target(path, "--report junit:")?;
        }
    }
    Ok(())
}
