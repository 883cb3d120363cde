//! Loopback ports for idem's own servers to listen on (a Galera node's, a Redis pair's), drawn below the system's range of ephemeral ports.
//!
//! A port found free by binding it and letting it go is taken by the
//! server a moment later. In that moment the system may hand the same
//! port to anyone who asks for an ephemeral one: any outgoing connection,
//! or another server of idem's found free the same way. Drawn below that
//! range, a port is handed out by no one but a program that names it.

use anyhow::{Result, bail};

/// Where the ports are drawn from when the system's range cannot be read:
/// Linux's default ephemeral range starts at 32768.
const DEFAULT_EPHEMERAL_LOW: u16 = 32768;

/// The lowest port drawn: well above the ports services are known by.
const LOWEST: u16 = 20000;

/// How many ports are tried before giving up.
const TRIES: usize = 200;

/// A loopback port free right now, below the ephemeral range.
pub fn free_port() -> Result<u16> {
    let high = ephemeral_low().max(LOWEST + 1);
    for _ in 0..TRIES {
        let draw = uuid::Uuid::new_v4().as_u128() as u32;
        let port = LOWEST + (draw % u32::from(high - LOWEST)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free loopback port found from {LOWEST} to {high} in {TRIES} tries")
}

/// The most of `/proc/sys/net/ipv4/ip_local_port_range` read: two
/// numbers.
const RANGE_BYTES: u64 = 64;

/// The low end of the system's ephemeral range.
fn ephemeral_low() -> u16 {
    let range = std::path::Path::new("/proc/sys/net/ipv4/ip_local_port_range");
    crate::files::read_text(range, RANGE_BYTES, "the ephemeral port range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_LOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_drawn_below_the_ephemeral_range() {
        let port = free_port().unwrap();
        assert!(
            (LOWEST..ephemeral_low().max(LOWEST + 1)).contains(&port),
            "{port}"
        );
    }
}
