//! A user's Redis (`--redis-url`): reached with the same limits as idem's own, touched only under the run's prefix, and left as it was found.
//!
//! The run's keys all start with `idem:<8 hex digits>:`, a prefix drawn
//! for the run. Each carries a time to live (a claim its `PX`, a completed
//! response a day, a fencing counter as long), so that even a run killed
//! with SIGKILL leaves nothing that does not expire; a run that ends in any
//! other way deletes every key under its prefix (`SCAN ... MATCH`, then
//! `UNLINK`) before it exits. idem never changes the server's settings
//! there: the options that would (`--redis-pressure`) are refused.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::secret::redact;

/// How long one command may take before the request gives up on it.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(5);

/// How long the cleanup at the run's end may take in all.
const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

/// How many keys one `SCAN` step looks at.
const SCAN_COUNT: u64 = 1000;

/// `--redis-url`, read once: what the client connects with, and the URL
/// with its password hidden for messages.
#[derive(Clone)]
pub struct RedisUrl {
    client: redis::Client,
    shown: String,
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisUrl").field(&self.shown).finish()
    }
}

impl RedisUrl {
    /// Reads `text` (`redis://`, `rediss://` for TLS, `redis+unix://` or
    /// `unix://`); a malformed one is said in one line, its password hidden.
    pub fn parse(text: &str) -> Result<Self> {
        let shown = redact(text);
        let client = redis::Client::open(text).map_err(|err| {
            anyhow::anyhow!(
                "--redis-url {shown} is not a Redis URL (redis://, rediss://, redis+unix://): {}",
                super::secret::scrub(&err.to_string())
            )
        })?;
        Ok(Self { client, shown })
    }

    /// The URL with its password hidden.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A connection, within [`COMMAND_LIMIT`], that has answered PING.
    pub async fn connect(&self) -> Result<redis::aio::MultiplexedConnection> {
        let connecting = open(&self.client);
        let mut conn = match tokio::time::timeout(COMMAND_LIMIT, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(err)) => bail!(
                "could not reach Redis at {}: {}",
                self.shown,
                crate::controls::escaped(&super::secret::scrub(&err.to_string()))
            ),
            Err(_) => bail!(
                "Redis at {} did not answer within {} s",
                self.shown,
                COMMAND_LIMIT.as_secs()
            ),
        };
        bounded(redis::cmd("PING").query_async::<String>(&mut conn), "PING")
            .await
            .with_context(|| format!("Redis at {}", self.shown))?;
        Ok(conn)
    }

    /// Deletes every key under `prefix`, blocking, within [`CLEANUP_LIMIT`]:
    /// how many it deleted, or why it stopped.
    pub fn remove_prefix(&self, prefix: &str) -> Result<u64> {
        let deadline = Instant::now() + CLEANUP_LIMIT;
        let mut conn = self
            .client
            .get_connection_with_timeout(COMMAND_LIMIT)
            .context("could not reach Redis to remove the run's keys")?;
        conn.set_read_timeout(Some(COMMAND_LIMIT))?;
        conn.set_write_timeout(Some(COMMAND_LIMIT))?;
        let pattern = format!("{}*", glob_escaped(prefix));
        let (mut cursor, mut removed) = (0u64, 0u64);
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query(&mut conn)?;
            if !keys.is_empty() {
                removed += redis::cmd("UNLINK").arg(&keys).query::<u64>(&mut conn)?;
            }
            if next == 0 {
                return Ok(removed);
            }
            if Instant::now() > deadline {
                bail!("the cleanup took longer than {} s", CLEANUP_LIMIT.as_secs());
            }
            cursor = next;
        }
    }
}

/// A multiplexed connection from `client` whose commands wait for their
/// answer as long as idem's own limit, [`COMMAND_LIMIT`] (the crate's own
/// default, half a second, would cut a `WAIT` short).
pub async fn open(client: &redis::Client) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(COMMAND_LIMIT))
        .set_response_timeout(Some(COMMAND_LIMIT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// `command` with [`COMMAND_LIMIT`], its error one line naming it.
pub async fn bounded<T>(
    command: impl std::future::Future<Output = redis::RedisResult<T>>,
    name: &str,
) -> Result<T> {
    match tokio::time::timeout(COMMAND_LIMIT, command).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => bail!(
            "Redis refused {name}: {}",
            crate::controls::escaped(&err.to_string())
        ),
        Err(_) => bail!(
            "Redis did not answer {name} within {} s",
            COMMAND_LIMIT.as_secs()
        ),
    }
}

/// `text` with the characters a `MATCH` pattern treats specially escaped.
fn glob_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        let url = RedisUrl::parse("redis://app:s3cret-pw@127.0.0.1:6399/0").unwrap();
        assert!(!url.shown().contains("s3cret-pw"), "{}", url.shown());
        assert!(!format!("{url:?}").contains("s3cret-pw"));
    }

    #[test]
    fn a_malformed_url_is_refused_without_its_password() {
        let err = RedisUrl::parse("http://app:s3cret-pw@host/").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("not a Redis URL"), "{text}");
        assert!(!text.contains("s3cret-pw"), "{text}");
    }

    #[test]
    fn the_prefix_pattern_matches_the_prefix_only() {
        assert_eq!(glob_escaped("idem:0a1b2c3d:"), "idem:0a1b2c3d:");
        assert_eq!(glob_escaped("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
