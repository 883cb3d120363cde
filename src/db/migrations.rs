//! The migrations in `migrations/`, built into the binary and applied by sqlx's migrator.
//!
//! They are listed here by hand rather than with `sqlx::migrate!` so that sqlx
//! builds without its macros; a test checks that this list and the folder agree.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

/// Every migration file, in order: (version, description, SQL).
pub const FILES: &[(i64, &str, &str)] = &[
    (
        1,
        "idempotency keys",
        include_str!("../../migrations/0001_idempotency_keys.sql"),
    ),
    (
        2,
        "experience points",
        include_str!("../../migrations/0002_experience_points.sql"),
    ),
    (
        3,
        "experience points lesson",
        include_str!("../../migrations/0003_experience_points_lesson.sql"),
    ),
    (
        4,
        "cache entries",
        include_str!("../../migrations/0004_cache_entries.sql"),
    ),
];

/// A migrator over [`FILES`]. It takes no advisory lock: each run migrates its
/// own schema, so runs sharing a server have nothing to serialise.
pub fn migrator() -> Migrator {
    let migrations = FILES
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ignore_missing: false,
        locking: false,
        no_tx: false,
    }
}
