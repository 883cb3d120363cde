//! `idem audit`: what the key table and the cache still know about a key in a kept schema.

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::cli::teaching::AuditArgs;
use crate::db::{ConnectOptions, Database};
use crate::report::{Output, stores::render_audit};
use crate::store::audit::audit;

/// An audit of one key in a kept schema.
pub struct Plan {
    key: String,
    pub(crate) out: Output,
    db: ConnectOptions,
}

/// An audit reads a schema an earlier run kept; a fresh database has nothing to tell.
pub fn plan(args: &AuditArgs) -> Result<Plan> {
    if args.kept.schema.is_none() {
        bail!(
            "audit reads a schema kept by an earlier run: pass --database-url and --schema \
             (from `idem race --keep`), or see the audit of a fresh race with `idem race --audit`"
        );
    }
    Ok(Plan {
        key: args.key.clone(),
        out: Output::from_json_flag(args.json),
        db: args.kept.options(&args.connect),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let found = audit(db, &self.key).await?;
        self.out.record(&found, render_audit)
    }
}
