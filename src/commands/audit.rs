//! `idem audit`: what the key table and the cache still know about a key in a kept schema.

use anyhow::{Result, bail};

use crate::cli::teaching::AuditArgs;
use crate::db::{ConnectOptions, Database};
use crate::report::{Output, stores::render_audit};
use crate::store::audit::audit;

/// An audit reads a schema an earlier run kept; a fresh database has nothing to tell.
pub fn connect(args: &AuditArgs) -> Result<ConnectOptions> {
    if args.kept.schema.is_none() {
        bail!(
            "audit reads a schema kept by an earlier run: pass --database-url and --schema \
             (from `idem race --keep`), or see the audit of a fresh race with `idem race --audit`"
        );
    }
    Ok(ConnectOptions {
        schema: args.kept.schema.clone(),
        ..args.connect.options()
    })
}

pub async fn execute(args: &AuditArgs, out: Output, db: &Database) -> Result<()> {
    let found = audit(db, &args.key).await?;
    out.record(&found, render_audit)
}
