//! A `mysql://` or `mariadb://` URL, read once: its connect options, with the files its TLS names read safely, and a form that never shows its password.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use anyhow::Result;
use sqlx::ConnectOptions;
use sqlx::mysql::MySqlConnectOptions;

use crate::db::secret::{redact, scrub};
use crate::files::MAX_PEM_BYTES;

/// Whether `url` names a MySQL-family server.
pub fn is_mysql(url: &str) -> bool {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("mysql" | "mariadb"))
}

/// A MySQL-family URL as idem uses it.
#[derive(Clone)]
pub struct MysqlUrl {
    /// What the driver connects with; TLS as the URL's `ssl-mode` asks.
    pub options: MySqlConnectOptions,
    /// The URL with its password hidden, for messages.
    pub shown: String,
}

impl fmt::Debug for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MysqlUrl").field(&self.shown).finish()
    }
}

impl MysqlUrl {
    /// Reads `url`, given as `flag`. Every file it names (`ssl-ca`,
    /// `ssl-cert`, `ssl-key`) is read by idem as every other file is: a
    /// regular file of at most [`MAX_PEM_BYTES`], opened without waiting.
    /// The driver would read them itself at connect time, whole and
    /// through a FIFO's open, past any timeout.
    pub fn parse(url: &str, flag: &str) -> Result<Self> {
        let shown = redact(url);
        let url = match url.split_once("://") {
            Some((_, rest)) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let bad = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("{flag} {shown}: {}", scrub(&e.to_string()))
        };
        let mut parsed = url::Url::parse(&url).map_err(|e| bad(&e))?;
        let mut files: Vec<(FileParam, String)> = Vec::new();
        let mut kept: Vec<(String, String)> = Vec::new();
        for (key, value) in parsed.query_pairs() {
            match FileParam::named(&key) {
                Some(param) => files.push((param, value.into_owned())),
                None => kept.push((key.into_owned(), value.into_owned())),
            }
        }
        if !files.is_empty() {
            parsed.set_query(None);
            if !kept.is_empty() {
                parsed.query_pairs_mut().extend_pairs(&kept);
            }
        }
        let mut options = MySqlConnectOptions::from_str(parsed.as_str())
            .map_err(|e| bad(&e))?
            .disable_statement_logging();
        for (param, path) in files {
            let what = format!("{flag}'s {}", param.name());
            let pem = crate::files::read_regular(Path::new(&path), MAX_PEM_BYTES, &what)?;
            options = match param {
                FileParam::Ca => options.ssl_ca_from_pem(pem),
                FileParam::Cert => options.ssl_client_cert_from_pem(pem),
                FileParam::Key => options.ssl_client_key_from_pem(pem),
            };
        }
        Ok(Self { options, shown })
    }
}

/// A URL parameter that names a file, in the spellings the driver reads.
#[derive(Debug, Clone, Copy)]
enum FileParam {
    Ca,
    Cert,
    Key,
}

impl FileParam {
    fn named(key: &str) -> Option<Self> {
        match key {
            "ssl-ca" | "sslca" => Some(Self::Ca),
            "ssl-cert" | "sslcert" => Some(Self::Cert),
            "ssl-key" | "sslkey" => Some(Self::Key),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Ca => "ssl-ca",
            Self::Cert => "ssl-cert",
            Self::Key => "ssl-key",
        }
    }
}
