//! `idem challenge`: idem's own guard through the challenge's four cases (the learner's is `cargo run --example challenge`).

use std::sync::Arc;

use anyhow::{Result, bail};

use crate::challenge::{LOCK_TIMEOUT, judge};
use crate::db::Database;
use crate::report::Output;
use crate::report::challenge::render;
use crate::strategy::guard::Guard;

pub async fn execute(db: &Database, out: Output) -> Result<()> {
    let guard = Guard {
        lock_timeout: LOCK_TIMEOUT,
        ..Guard::default()
    };
    let cases = judge(db, Arc::new(guard)).await?;
    for case in &cases {
        out.record(case, |_| String::new())?;
    }
    out.text(|| render("idem's guard (src/strategy/guard.rs)", &cases))?;
    if cases.iter().any(|c| !c.passed) {
        bail!("the guard failed a case");
    }
    Ok(())
}
