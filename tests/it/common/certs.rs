//! Certificates made for one test: a CA of its own, server certificates it signs, and a stranger CA that signed none of them.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A test's own certificate authority, its files in `dir`.
pub struct Pki {
    pub dir: PathBuf,
    /// The CA's certificate (PEM): what `--cacert` and `sslrootcert` trust.
    pub ca: PathBuf,
    /// Another CA's certificate, trusted by nothing here.
    pub stranger: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

/// A server certificate and its key, as PEM files.
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path) -> Self {
        let (issuer, ca_pem) = authority("idem test CA");
        let (_, stranger_pem) = authority("a stranger CA");
        let ca = dir.join("ca.pem");
        let stranger = dir.join("stranger.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        std::fs::write(&stranger, stranger_pem).unwrap();
        Self {
            dir: dir.to_path_buf(),
            ca,
            stranger,
            issuer,
        }
    }

    /// A certificate for `names` (DNS names or IP addresses), signed by the CA.
    pub fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }
}

/// A self-signed CA: its issuer, and its certificate as PEM.
fn authority(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    (Issuer::new(params, key), cert.pem())
}

/// What `openssl req -x509` makes: a self-signed certificate for `names`
/// that says it is a CA (basicConstraints CA:TRUE), used as a server's own.
pub fn self_signed_ca_as_leaf(dir: &Path, names: &[&str]) -> Leaf {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let leaf = Leaf {
        cert: dir.join("self-signed.pem"),
        key: dir.join("self-signed.key"),
    };
    std::fs::write(&leaf.cert, cert.pem()).unwrap();
    std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
    leaf
}
