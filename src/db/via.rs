//! How the app's connections reach PostgreSQL: directly, or through a real PgBouncer in transaction mode.

use serde::{Deserialize, Serialize};

/// The path between the app's pool and the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// Each pooled connection is a server process of its own.
    #[default]
    Direct,
    /// Through PgBouncer in transaction mode (`pool_mode = transaction`):
    /// a pooled connection gets a server process for one transaction at a
    /// time, and between transactions that process serves other clients.
    Pgbouncer,
}

impl Via {
    pub fn name(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Pgbouncer => "pgbouncer",
        }
    }
}
