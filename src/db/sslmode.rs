//! TLS to PostgreSQL with libpq's meaning: `sslmode` and `sslrootcert` read from the URL (or `PGSSLMODE`, `PGSSLROOTCERT`), for every connection idem opens.
//!
//! sqlx reads these settings itself; tokio-postgres (the workers' pool, the
//! count query) knows only `disable`, `prefer` and `require`, and no root
//! certificate at all. So idem takes both settings out of the URL, gives
//! tokio-postgres the rest, and brings a rustls connector that checks what
//! libpq would check:
//!
//! | sslmode | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (the default) | if the server offers it | no |
//! | `require` | always | no (as `verify-ca` when `sslrootcert` is given, as libpq does) |
//! | `verify-ca` | always | signed by a trusted root |
//! | `verify-full` | always | signed by a trusted root, and for the host's name |
//!
//! Trusted roots are `sslrootcert`'s file, else `~/.postgresql/root.crt`
//! as libpq reads it, else (where libpq would refuse) the system's roots;
//! `sslrootcert=system` asks for the system's roots outright.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use tokio_postgres::config::SslMode as DriverMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::trust::AnyCertificate;

use super::secret::percent_decode;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => bail!(
                "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ),
        })
    }
}

/// The URL's TLS settings, and the URL without them.
#[derive(Debug, Clone)]
pub struct Tls {
    mode: SslMode,
    /// `sslrootcert`: a PEM file, or `system`.
    root_cert: Option<String>,
}

/// Parameters taken out of a URL before tokio-postgres reads it.
const TAKEN: [&str; 2] = ["sslmode", "sslrootcert"];

/// Parameters libpq knows that idem cannot honour: refused, not ignored.
const REFUSED: [&str; 3] = ["sslcert", "sslkey", "sslcrl"];

impl Tls {
    /// Reads the settings from `url` (a `postgres://` URL or a key=value
    /// string), or from the environment as libpq does; returns them with
    /// the URL left for tokio-postgres.
    pub fn take_from(url: &str) -> Result<(Self, String)> {
        let (rest, found) = take_params(url, &TAKEN, &REFUSED)?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mode = match found
            .iter()
            .find(|(k, _)| k == "sslmode")
            .map(|(_, v)| v.clone())
        {
            Some(mode) => SslMode::parse(&mode)?,
            None => match env("PGSSLMODE") {
                Some(mode) => {
                    SslMode::parse(&mode).map_err(|e| anyhow::anyhow!("PGSSLMODE: {e}"))?
                }
                None => SslMode::Prefer,
            },
        };
        let root_cert = found
            .iter()
            .find(|(k, _)| k == "sslrootcert")
            .map(|(_, v)| v.clone())
            .or_else(|| env("PGSSLROOTCERT"));
        Ok((Self { mode, root_cert }, rest))
    }

    /// No TLS: the disposable cluster's unix socket.
    pub fn disabled() -> Self {
        Self {
            mode: SslMode::Disable,
            root_cert: None,
        }
    }

    /// sqlx's options with the same meaning: its modes are libpq's, but
    /// `require` with a root certificate checks the chain as libpq does,
    /// and `system` (a word, not a file) is sqlx's default roots.
    pub fn for_sqlx(&self, opts: PgConnectOptions) -> PgConnectOptions {
        let root = match self.root_cert.as_deref() {
            Some("system") => None,
            Some(file) => Some(PathBuf::from(file)),
            None => default_root_cert(),
        };
        let mode = match self.mode {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Allow => PgSslMode::Allow,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require if self.root_cert.is_some() => PgSslMode::VerifyCa,
            SslMode::Require => PgSslMode::Require,
            SslMode::VerifyCa => PgSslMode::VerifyCa,
            SslMode::VerifyFull => PgSslMode::VerifyFull,
        };
        let disabled = matches!(mode, PgSslMode::Disable);
        let opts = opts.ssl_mode(mode);
        match root {
            Some(file) if !disabled => opts.ssl_root_cert(file),
            _ => opts,
        }
    }

    /// The mode tokio-postgres is given (it encrypts or not; the connector
    /// below decides what is checked).
    pub fn driver_mode(&self) -> DriverMode {
        match self.mode {
            SslMode::Disable => DriverMode::Disable,
            SslMode::Allow | SslMode::Prefer => DriverMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverMode::Require,
        }
    }

    /// A connector that checks the server's certificate as the mode says.
    pub fn connector(&self) -> Result<MakeRustlsConnect> {
        let provider = crate::trust::provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let checks = match (self.mode, &self.root_cert) {
            (SslMode::VerifyFull, _) => Check::Full,
            (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Check::Chain,
            _ => Check::Nothing,
        };
        let config = match checks {
            Check::Nothing => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
            Check::Full => builder
                .with_root_certificates(self.roots()?)
                .with_no_client_auth(),
            Check::Chain => {
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider)
                        .build()?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
                    .with_no_client_auth()
            }
        };
        Ok(MakeRustlsConnect::new(config))
    }

    /// The roots a verifying mode trusts.
    fn roots(&self) -> Result<RootCertStore> {
        match self.root_cert.as_deref() {
            Some("system") => crate::trust::system_roots(),
            Some(file) => crate::trust::roots_from(std::path::Path::new(file), "sslrootcert"),
            None => match default_root_cert() {
                Some(file) => crate::trust::roots_from(&file, "sslrootcert"),
                None => crate::trust::system_roots(),
            },
        }
    }
}

/// A hint for a refused connection whose message is pg_hba.conf's for a
/// server that takes only TLS; empty otherwise.
pub fn hint_for(message: &str) -> &'static str {
    match message.contains("no encryption") {
        true => {
            "; the server accepts only encrypted connections: add sslmode=require (or verify-full) to the URL"
        }
        false => "",
    }
}

/// What the connector checks.
enum Check {
    Nothing,
    Chain,
    Full,
}

/// libpq's default root certificate, if it is there.
fn default_root_cert() -> Option<PathBuf> {
    let file = PathBuf::from(std::env::var_os("HOME")?).join(".postgresql/root.crt");
    file.is_file().then_some(file)
}

/// `url` without the parameters in `take`, and their values; a parameter in
/// `refuse` is an error. Works on `postgres://` URLs (query parameters) and
/// on key=value strings.
fn take_params(
    url: &str,
    take: &[&str],
    refuse: &[&str],
) -> Result<(String, Vec<(String, String)>)> {
    let mut found = Vec::new();
    let mut keep = |key: &str, value: &str| -> Result<bool> {
        if refuse.contains(&key) {
            bail!(
                "{key} is not supported by idem's connections; connect without a client certificate"
            );
        }
        if take.contains(&key) {
            found.push((key.to_owned(), value.to_owned()));
            return Ok(false);
        }
        Ok(true)
    };
    if url.contains("://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), found));
        };
        let (query, fragment) = match query.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (query, None),
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if keep(&percent_decode(key), &percent_decode(value))? {
                kept.push(pair);
            }
        }
        let mut rest = base.to_owned();
        if !kept.is_empty() {
            rest.push('?');
            rest.push_str(&kept.join("&"));
        }
        if let Some(fragment) = fragment {
            rest.push('#');
            rest.push_str(fragment);
        }
        return Ok((rest, found));
    }
    let mut kept = Vec::new();
    for (key, value, text) in key_values(url) {
        if keep(&key, &value)? {
            kept.push(text);
        }
    }
    Ok((kept.join(" "), found))
}

/// `key=value` pairs of a libpq connection string, each with its text.
fn key_values(text: &str) -> Vec<(String, String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return pairs;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == '=') {
            chars.next();
        }
        let mut value = String::new();
        let mut raw = String::new();
        if chars.peek() == Some(&'\'') {
            raw.push('\'');
            chars.next();
            while let Some(c) = chars.next() {
                raw.push(c);
                match c {
                    '\\' => {
                        if let Some(next) = chars.next() {
                            raw.push(next);
                            value.push(next);
                        }
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                raw.push(c);
                chars.next();
            }
        }
        pairs.push((key.clone(), value, format!("{key}={raw}")));
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name may be any.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_leave_the_url_and_the_rest_stays() {
        let (found, rest) = take_params(
            "postgres://u@h/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
            &TAKEN,
            &REFUSED,
        )
        .unwrap();
        assert_eq!(found, "postgres://u@h/db?application_name=x");
        assert_eq!(
            rest,
            vec![
                ("sslmode".to_owned(), "verify-full".to_owned()),
                ("sslrootcert".to_owned(), "/tmp/ca.pem".to_owned())
            ]
        );
        let (found, rest) =
            take_params("host=h sslmode = require password='a b'", &TAKEN, &REFUSED).unwrap();
        assert_eq!(found, "host=h password='a b'");
        assert_eq!(rest, vec![("sslmode".to_owned(), "require".to_owned())]);
        assert!(take_params("postgres://h/db?sslcert=c.pem", &TAKEN, &REFUSED).is_err());
    }

    #[test]
    fn modes_are_libpqs() {
        assert!(SslMode::parse("verify-full").is_ok());
        assert!(SslMode::parse("verify_full").is_err());
    }
}
