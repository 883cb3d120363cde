//! `idem pooler` for people: each finding, what the second client saw directly and through PgBouncer, and what it means.

use std::fmt::Write;

use super::style::{bad, dim, good, strong};
use crate::pooler::PoolerReport;

pub fn render(r: &PoolerReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        strong(format!(
            "idem pooler · {} · pool_mode = {}",
            r.pgbouncer, r.pool_mode
        ))
    );
    let _ = writeln!(
        out,
        "{}\n",
        dim("two clients, the same steps, directly and through PgBouncer")
    );
    for f in &r.findings {
        let _ = writeln!(out, "{}", strong(f.name.replace('_', " ")));
        let _ = writeln!(out, "  {}", f.steps);
        let _ = writeln!(out, "  directly:          {}", f.direct);
        let through = format!("  through PgBouncer: {}", f.pooled);
        let _ = writeln!(
            out,
            "{}",
            if f.broken_runs > 0 {
                bad(through)
            } else {
                good(through)
            }
        );
        let _ = writeln!(
            out,
            "  {}",
            dim(format!("differed in {} of {} runs", f.broken_runs, f.runs))
        );
        let _ = writeln!(out, "  {}\n", f.meaning);
    }
    out
}
