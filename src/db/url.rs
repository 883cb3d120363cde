//! A database URL, parsed once: the one value both drivers are made from, which knows its TLS and never shows its password.
//!
//! tokio-postgres reads the URL (libpq's URL and key-value forms alike);
//! sqlx's settings for the bookkeeping are then made from what it read,
//! so that the two drivers reach the same server as the same user, and
//! nothing reads the text again. The text itself is kept only to hand to
//! the programs idem starts (an app replica, `idem db`'s command).

use std::fmt;
use std::str::FromStr;

use anyhow::{Result, bail};
use sqlx::postgres::PgConnectOptions;
use tokio_postgres::config::Host;

use super::secret::redact;
use super::sslmode::Tls;

/// A database URL as idem uses it.
#[derive(Clone)]
pub struct DatabaseUrl {
    /// What tokio-postgres read, TLS aside; a password from `PGPASSWORD`
    /// when the URL has none, as libpq and sqlx take it.
    config: tokio_postgres::Config,
    /// The URL's TLS, as libpq means `sslmode` and `sslrootcert`.
    tls: Tls,
    /// The URL with its password hidden, for messages.
    shown: String,
    /// The URL as given, for the programs idem starts; never printed.
    given: String,
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.shown).finish()
    }
}

impl DatabaseUrl {
    /// Reads `text`: its TLS parameters, then everything else; a malformed
    /// URL is said in one line, its password hidden.
    pub fn parse(text: &str) -> Result<Self> {
        let shown = redact(text);
        if text.trim().is_empty() {
            bail!(
                "the database URL (--database-url or DATABASE_URL) is empty: give one, \
                 or leave it unset for a disposable cluster"
            );
        }
        let (tls, rest) =
            Tls::take_from(text).map_err(|e| anyhow::anyhow!("database URL {shown}: {e}"))?;
        let mut config =
            tokio_postgres::Config::from_str(&query_host_replaces(&rest)).map_err(|e| {
                anyhow::anyhow!("malformed database URL {shown}: {}", super::said::chain(&e))
            })?;
        let hosts = config.get_hosts().len().max(config.get_hostaddrs().len());
        if hosts > 1 {
            bail!(
                "database URL {shown} names {hosts} hosts: idem's bookkeeping and its workers \
                 must reach one server, so give one host"
            );
        }
        config.ssl_mode(tls.driver_mode());
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        Ok(Self {
            config,
            tls,
            shown,
            given: text.to_owned(),
        })
    }

    /// The URL with its password hidden.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The URL as given, for a program idem starts; never for printing.
    pub fn given(&self) -> &str {
        &self.given
    }

    /// The URL's TLS.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The socket directory the URL names, when it is named like a run
    /// directory of idem's (`idem-...`, as cluster.rs names them) with a
    /// cluster's data beside it. A name proves nothing by itself: whether
    /// the server there is idem's is [`super::ownership::prove`]'s to say.
    pub fn idem_run_socket(&self) -> Option<std::path::PathBuf> {
        self.for_workers()
            .get_hosts()
            .iter()
            .find_map(|host| match host {
                tokio_postgres::config::Host::Unix(dir) => Some(dir.clone()),
                _ => None,
            })
            .filter(|dir| {
                dir.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("idem-"))
                    && dir.join("data").is_dir()
            })
    }

    /// tokio-postgres's settings: the workers' pool and the probe's count.
    pub fn for_workers(&self) -> tokio_postgres::Config {
        self.config.clone()
    }

    /// sqlx's settings for the bookkeeping, made from what tokio-postgres
    /// read; what the URL leaves out comes from the environment as sqlx
    /// takes it (`PGHOST`, `PGUSER`, ...).
    pub fn for_bookkeeping(&self) -> Result<PgConnectOptions> {
        let c = &self.config;
        let mut options = PgConnectOptions::new_without_pgpass();
        match (c.get_hosts().first(), c.get_hostaddrs().first()) {
            (Some(Host::Tcp(host)), _) => options = options.host(host),
            (Some(Host::Unix(dir)), _) => options = options.socket(dir),
            (None, Some(address)) => options = options.host(&address.to_string()),
            (None, None) => {}
        }
        if let Some(port) = c.get_ports().first() {
            options = options.port(*port);
        }
        if let Some(user) = c.get_user() {
            options = options.username(user);
        }
        if let Some(password) = c.get_password() {
            let Ok(password) = std::str::from_utf8(password) else {
                bail!(
                    "database URL {}: the password is not UTF-8 text",
                    self.shown
                );
            };
            options = options.password(password);
        }
        if let Some(database) = c.get_dbname() {
            options = options.database(database);
        }
        if let Some(name) = c.get_application_name() {
            options = options.application_name(name);
        }
        if let Some(settings) = c.get_options() {
            let pairs = settings_of(settings)
                .map_err(|e| anyhow::anyhow!("database URL {}: options {e}", self.shown))?;
            options = options.options(pairs);
        }
        Ok(self.tls.for_sqlx(options))
    }
}

/// The URL with a `host` (or `hostaddr`) in its query in place of the host
/// before its path, as libpq reads it (`postgres://me@localhost/db?host=/run`
/// is the socket in `/run`; a port before the path still applies to it):
/// tokio-postgres would try both, one after the other.
fn query_host_replaces(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.into();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some((_, query)) = tail.split_once('?') else {
        return url.into();
    };
    let said = |key: &str| {
        query
            .split('&')
            .any(|p| p.split_once('=').map_or(p, |(k, _)| k) == key)
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    if hostport.is_empty() || !(said("host") || said("hostaddr")) {
        return url.into();
    }
    let port = match hostport.rsplit_once(':') {
        Some((host, port))
            if !port.contains(']') && (host.starts_with('[') == host.ends_with(']')) =>
        {
            Some(port)
        }
        _ => None,
    };
    let userinfo = userinfo.map_or(String::new(), |u| format!("{u}@"));
    let port = match port.filter(|_| !said("port")) {
        Some(port) => format!("&port={port}"),
        None => String::new(),
    };
    format!("{scheme}://{userinfo}{tail}{port}").into()
}

/// The `name=value` settings of libpq's `options` (`-c name=value`,
/// `-cname=value` or `--name=value`, separated by spaces, a space inside a
/// value escaped with a backslash).
fn settings_of(options: &str) -> Result<Vec<(String, String)>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut settings = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let setting = match word.as_str() {
            "-c" => words.next().unwrap_or_default(),
            w if w.starts_with("--") => w[2..].to_owned(),
            w if w.starts_with("-c") => w[2..].to_owned(),
            w => bail!("{w:?} is not a setting: idem passes on -c name=value settings only"),
        };
        match setting.split_once('=') {
            Some((name, value)) if !name.is_empty() => {
                settings.push((name.to_owned(), value.to_owned()));
            }
            _ => bail!("{setting:?} is not name=value"),
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_drivers_reach_the_same_server_as_the_same_user() {
        let url = DatabaseUrl::parse("postgres://ann:s3cret@db.example:6543/shop").unwrap();
        let sqlx = url.for_bookkeeping().unwrap();
        let workers = url.for_workers();
        assert_eq!(sqlx.get_host(), "db.example");
        assert_eq!(sqlx.get_port(), 6543);
        assert_eq!(sqlx.get_username(), "ann");
        assert_eq!(sqlx.get_database(), Some("shop"));
        assert_eq!(workers.get_user(), Some("ann"));
        assert_eq!(workers.get_password(), Some(&b"s3cret"[..]));
        assert!(!format!("{url:?}").contains("s3cret"));
        assert!(!url.shown().contains("s3cret"));
    }

    #[test]
    fn a_socket_directory_and_a_user_without_a_host_are_read_once() {
        let url = DatabaseUrl::parse("postgres://me@/db?host=/run/pg&port=5433").unwrap();
        let sqlx = url.for_bookkeeping().unwrap();
        assert_eq!(
            sqlx.get_socket().map(|p| p.display().to_string()),
            Some("/run/pg".into())
        );
        assert_eq!(sqlx.get_port(), 5433);
        assert_eq!(sqlx.get_username(), "me");
        assert_eq!(sqlx.get_database(), Some("db"));
    }

    #[test]
    fn a_host_in_the_query_replaces_the_one_before_the_path_as_in_libpq() {
        let url = DatabaseUrl::parse("postgres://me@localhost:5433/db?host=/run/pg").unwrap();
        let hosts = url.for_workers().get_hosts().to_vec();
        assert_eq!(hosts, [Host::Unix("/run/pg".into())]);
        assert_eq!(url.for_workers().get_ports(), [5433]);
        let sqlx = url.for_bookkeeping().unwrap();
        assert_eq!(
            sqlx.get_socket().map(|p| p.display().to_string()),
            Some("/run/pg".into())
        );
        assert_eq!(sqlx.get_port(), 5433);
        assert_eq!(
            query_host_replaces("postgres://[::1]:6000/db?hostaddr=127.0.0.1&port=7"),
            "postgres:///db?hostaddr=127.0.0.1&port=7"
        );
        assert_eq!(
            query_host_replaces("postgres://[::1]/db?host=/run"),
            "postgres:///db?host=/run"
        );
        assert_eq!(
            query_host_replaces("postgres://db.example/db?sslmode=require"),
            "postgres://db.example/db?sslmode=require"
        );
    }

    #[test]
    fn a_list_of_hosts_is_refused_in_one_line() {
        let refused = DatabaseUrl::parse("postgres://a,b/db").unwrap_err();
        assert!(refused.to_string().contains("names 2 hosts"), "{refused}");
    }

    #[test]
    fn the_urls_settings_reach_the_bookkeeping_too() {
        let url = DatabaseUrl::parse("postgres://h/db?options=-c%20search_path%3Dx%20--geqo%3Doff")
            .unwrap();
        let sqlx = url.for_bookkeeping().unwrap();
        assert_eq!(sqlx.get_options(), Some("-c search_path=x -c geqo=off"));
        let refused = DatabaseUrl::parse("postgres://h/db?options=-d%205")
            .unwrap()
            .for_bookkeeping()
            .unwrap_err();
        assert!(refused.to_string().contains("-c name=value"), "{refused}");
    }
}
