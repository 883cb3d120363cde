//! `idem bench --only release`: how tightly the probe's N requests reach a server, in each release mode, in cleartext and over TLS, measured by the server's own clock.
//!
//! The arrival spread of one burst is the time between the first and the
//! last request's final byte reaching the server ([`super::arrival`]). A
//! burst's HTTP/2 final frames that all arrive in one read came in one
//! segment. Figures are medians and 90th percentiles over many bursts.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use rustls::pki_types::CertificateDer;
use serde::Serialize;
use tokio_rustls::TlsAcceptor;

use super::arrival::{Arrival, ArrivalServer};
use crate::http::client::{Offer, Reach, Trust};
use crate::http::stream::Protocol;
use crate::probe::Probe;
use crate::probe::release::Mode;

/// One mode at one N: the spread as the server saw it.
#[derive(Debug, Clone, Serialize)]
pub struct ReleaseFigure {
    pub mode: Mode,
    pub protocol: Protocol,
    pub tls: bool,
    pub requests: usize,
    pub bursts: usize,
    /// Arrival spread at the server, µs.
    pub median_us: f64,
    pub p90_us: f64,
    /// Bursts whose final bytes all came in one read of one connection.
    pub in_one_read: usize,
    /// The client's own spread between its first and last final write, µs.
    pub client_median_us: f64,
}

const AWARD: &str = r#"{"user_id": 42, "amount": 10}"#;

/// Every mode, N and transport; `quick` runs a few bursts at two sizes.
pub async fn measure(quick: bool) -> Result<Vec<ReleaseFigure>> {
    let (sizes, bursts): (&[usize], usize) = match quick {
        true => (&[5, 20], 5),
        false => (&[5, 20, 100], 30),
    };
    // Cleartext, then TLS if this build can make a certificate.
    let mut legs = vec![(None, Trust::System)];
    if let Some((cert, acceptor)) = loopback_certificate()? {
        legs.push((Some(acceptor), Trust::Certificate(cert)));
    }
    let mut figures = Vec::new();
    for (acceptor, trust) in legs {
        for mode in Mode::ALL {
            let tls = acceptor.is_some();
            let server = ArrivalServer::start(mode.protocol(), acceptor.clone()).await?;
            for &n in sizes {
                figures.push(measure_one(&server, mode, tls, &trust, n, bursts).await?);
            }
        }
    }
    Ok(figures)
}

async fn measure_one(
    server: &ArrivalServer,
    mode: Mode,
    tls: bool,
    trust: &Trust,
    n: usize,
    bursts: usize,
) -> Result<ReleaseFigure> {
    let scheme = if tls { "https" } else { "http" };
    let reach = Reach {
        trust: trust.clone(),
        offer: match mode.protocol() {
            Protocol::Http11 => Offer::Http11,
            Protocol::Http2 => Offer::Http2,
        },
        prior_knowledge: mode.protocol() == Protocol::Http2 && !tls,
    };
    let url = format!("{scheme}://localhost:{}/lessons/1/complete", server.port);
    let body = Bytes::from_static(AWARD.as_bytes());
    let probe = Probe::new(
        &url,
        &reach,
        "POST",
        &[],
        body.clone(),
        Duration::from_secs(10),
        None,
    )?
    .releasing(mode);
    let (mut spreads, mut client, mut in_one_read) = (Vec::new(), Vec::new(), 0);
    for burst in 0..bursts {
        server.take();
        let volley = probe
            .volley(Some(&format!("release-{burst}")), &body, n)
            .await;
        if let Some(error) = volley.shots.iter().find_map(|s| s.error.clone()) {
            bail!("the release bench's {} burst failed: {error}", mode.name());
        }
        let arrivals = arrived(server, volley.release.sent).await?;
        spreads.push(spread(&arrivals));
        client.push(Duration::from_secs_f64(volley.release.spread_us / 1e6));
        let reads: std::collections::BTreeSet<(usize, u64)> =
            arrivals.iter().map(|a| (a.connection, a.read)).collect();
        in_one_read += usize::from(reads.len() == 1);
    }
    Ok(ReleaseFigure {
        mode,
        protocol: mode.protocol(),
        tls,
        requests: n,
        bursts,
        median_us: percentile_us(&mut spreads, 50),
        p90_us: percentile_us(&mut spreads.clone(), 90),
        in_one_read,
        client_median_us: percentile_us(&mut client, 50),
    })
}

/// Waits (two seconds at most) for `n` arrivals, and takes them.
async fn arrived(server: &ArrivalServer, n: usize) -> Result<Vec<Arrival>> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.count() < n {
        if Instant::now() > deadline {
            bail!(
                "the arrival server saw {} of {n} requests end",
                server.count()
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(server.take())
}

/// From the first arrival to the last.
fn spread(arrivals: &[Arrival]) -> Duration {
    let first = arrivals.iter().map(|a| a.at_ns).min().unwrap_or(0);
    let last = arrivals.iter().map(|a| a.at_ns).max().unwrap_or(0);
    Duration::from_nanos((last - first).max(0) as u64)
}

/// The `pct`-th percentile of `samples`, in µs, as [`crate::race::percentile`] takes it.
fn percentile_us(samples: &mut [Duration], pct: usize) -> f64 {
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    crate::race::percentile(&mut us, pct as f64 / 100.0)
}

/// A certificate for `localhost` made for this run, and a TLS acceptor
/// that serves it; none in a build without the `https-bench` feature.
#[cfg(not(feature = "https-bench"))]
pub fn loopback_certificate() -> Result<Option<(CertificateDer<'static>, TlsAcceptor)>> {
    Ok(None)
}

/// A certificate for `localhost` made for this run, and a TLS acceptor
/// that serves it.
#[cfg(feature = "https-bench")]
pub fn loopback_certificate() -> Result<Option<(CertificateDer<'static>, TlsAcceptor)>> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let cert = made.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let mut config = rustls::ServerConfig::builder_with_provider(crate::trust::provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some((cert, TlsAcceptor::from(std::sync::Arc::new(config)))))
}
