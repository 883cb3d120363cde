//! HTTPS with rustls: for the probe's clients, the system's roots (or `--cacert`, or no verification with `--insecure`), SNI, ALPN offering `h2` and `http/1.1`, and certificate errors in one line; for `idem serve`, a certificate and key of the user's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::trust::AnyCertificate;
pub use crate::trust::{provider, roots_from, system_roots};

/// Which certificates the client trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Trust {
    /// The system's root certificates.
    #[default]
    System,
    /// The CAs in a PEM file (`--cacert`), instead of the system's.
    CaFile(PathBuf),
    /// One certificate, trusted as a root (a test's or a bench's own).
    Certificate(CertificateDer<'static>),
    /// None checked at all (`--insecure`).
    Nothing,
}

/// Which protocols the client offers in ALPN, in order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// `h2`, then `http/1.1`: the server picks.
    Both,
    /// Only `h2` (`--http2`).
    Http2,
    /// Only `http/1.1` (`--http1.1`).
    Http11,
}

impl Offer {
    fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            Offer::Both => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Offer::Http2 => vec![b"h2".to_vec()],
            Offer::Http11 => vec![b"http/1.1".to_vec()],
        }
    }
}

/// A client configuration for `trust`, offering `offer`.
pub fn client_config(trust: &Trust, offer: Offer) -> Result<Arc<ClientConfig>> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("the TLS library refused its own defaults")?;
    let mut config = match trust {
        Trust::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        Trust::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Trust::CaFile(path) => builder
            .with_root_certificates(roots_from(path, "--cacert")?)
            .with_no_client_auth(),
        Trust::Certificate(cert) => {
            let mut roots = RootCertStore::empty();
            roots
                .add(cert.clone())
                .context("the certificate to trust is not one")?;
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = offer.protocols();
    Ok(Arc::new(config))
}

/// A server configuration from a PEM certificate chain and its private key
/// (`idem serve --tls-cert --tls-key`), offering `h2` and `http/1.1`.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let cert_pem = crate::files::read_regular(cert, crate::files::MAX_PEM_BYTES, "--tls-cert")?;
    let key_pem = crate::files::read_regular(key, crate::files::MAX_PEM_BYTES, "--tls-key")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "--tls-cert {}: not a PEM certificate file: {e}",
                cert.display()
            )
        })?;
    if chain.is_empty() {
        bail!("--tls-cert {} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| anyhow::anyhow!("--tls-key {}: no private key read: {e}", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("the TLS library refused its own defaults")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| anyhow::anyhow!("--tls-cert and --tls-key do not go together: {e}"))?;
    config.alpn_protocols = Offer::Both.protocols();
    Ok(Arc::new(config))
}

/// Opens TLS on `tcp` to `host` (its name for SNI and for the certificate);
/// the protocol the server chose comes with the stream.
pub async fn connect(
    config: Arc<ClientConfig>,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| anyhow::anyhow!("{host} is not a name TLS can check a certificate against"))?;
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| anyhow::anyhow!("TLS to {host} failed: {}", handshake_reason(&e)))
}

/// A failed handshake in a few words: for a certificate, why it was refused.
fn handshake_reason(err: &std::io::Error) -> String {
    let Some(tls) = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    else {
        return err.to_string();
    };
    match tls {
        rustls::Error::InvalidCertificate(cert) => {
            let why = match cert {
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "it has expired".to_owned()
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    "it is not valid yet".to_owned()
                }
                CertificateError::UnknownIssuer => {
                    "its issuer is not trusted (give its CA with --cacert, or --insecure)"
                        .to_owned()
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    "it is for another name".to_owned()
                }
                CertificateError::Revoked => "it is revoked".to_owned(),
                CertificateError::BadSignature => "its signature is bad".to_owned(),
                // webpki's error, which rustls passes on as `Other`: a
                // self-signed certificate made with `openssl req -x509`
                // is a CA's (basicConstraints CA:TRUE) serving as a leaf.
                other if format!("{other:?}").contains("CaUsedAsEndEntity") => {
                    "it is a CA certificate used as the server's own; pass it to --cacert, \
                     or use a certificate it signed"
                        .to_owned()
                }
                other => format!("{other:?}"),
            };
            format!("the server's certificate was refused: {why}")
        }
        rustls::Error::NoApplicationProtocol => {
            "the server speaks none of the protocols offered (ALPN)".to_owned()
        }
        other => other.to_string(),
    }
}
