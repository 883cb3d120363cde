//! The probe's cases' names, as their verdicts, the JSON and the reports give them: one constant each, which the cases and the tests both use.

pub const MISSING_KEY: &str = "missing key";
pub const OTHER_BODY: &str = "same key, other body";
pub const CONCURRENT: &str = "concurrent, same key";
pub const RETRIED: &str = "retry after completion";
pub const IN_FLIGHT_SAME: &str = "in flight, same key";
pub const IN_FLIGHT_OTHER: &str = "in flight, other body";
pub const AFTER_AN_ABORT: &str = "after an abort";
pub const ANOTHER_CALLER: &str = "another caller, same key";
pub const TWO_KEY_HEADERS: &str = "duplicate key header";
pub const REPLAY_MARKER: &str = "client-sent replay marker";
pub const ANOTHER_QUERY: &str = "another query string";
pub const ANOTHER_ENDPOINT: &str = "another endpoint";
pub const DISTINCT_KEYS: &str = "distinct keys in parallel";
