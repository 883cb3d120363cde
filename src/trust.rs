//! The TLS pieces both of idem's wires share, HTTP's and PostgreSQL's: one crypto provider, root certificates from the system or a PEM file, and a verifier that takes any certificate (for `--insecure` and for libpq's `prefer` and `require`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use rustls::RootCertStore;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The crypto every TLS connection of idem's uses: ring's.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The system's root certificates (the files OpenSSL would read).
pub fn system_roots() -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        bail!(
            "no system root certificates were found (Debian: ca-certificates); give --cacert FILE or --insecure"
        );
    }
    Ok(roots)
}

/// The certificates in a PEM file, as roots; `flag` names the setting.
pub fn roots_from(path: &Path, flag: &str) -> Result<RootCertStore> {
    let shown = path.display();
    let pem = crate::files::read_regular(path, crate::files::MAX_PEM_BYTES, flag)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{flag} {shown}: not a PEM certificate file: {e}"))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        bail!("{flag} {shown} holds no certificate");
    }
    Ok(roots)
}

/// Every certificate is taken (`--insecure`; libpq's `prefer` and
/// `require`); the handshake's signatures are still checked, so the
/// connection is encrypted to whoever holds the certificate's key.
#[derive(Debug)]
pub struct AnyCertificate(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
