//! The front door of `--replicas`: one port that hands each new connection to the next replica in turn, as a round-robin load balancer does.
//!
//! Bytes are copied as they come, both ways, through fixed buffers; a
//! connection silent for the idle timeout is closed, and no more than the
//! cap are open at once (the rest wait in the listen queue).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How many bytes each direction of a connection holds at once.
const BUFFER: usize = 16 * 1024;

/// How long a replica may take to accept a forwarded connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the front door sends connections, and its bounds.
pub struct Backends {
    pub replicas: Vec<SocketAddr>,
    /// Connections open at once, at most.
    pub cap: usize,
    /// A connection with no byte either way for this long is closed.
    pub idle: Duration,
}

/// Accepts on `listener` until dropped, handing connection n to replica
/// n mod N.
pub async fn round_robin(listener: TcpListener, backends: Backends) {
    let backends = Arc::new(backends);
    let next = AtomicUsize::new(0);
    let open = Arc::new(Semaphore::new(backends.cap.max(1)));
    loop {
        let Ok(permit) = open.clone().acquire_owned().await else {
            return;
        };
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors, say: let a connection close first.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let n = next.fetch_add(1, Ordering::Relaxed) % backends.replicas.len();
        let (replica, idle) = (backends.replicas[n], backends.idle);
        tokio::spawn(async move {
            let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(replica));
            if let Ok(Ok(upstream)) = connected.await {
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                splice(client, upstream, idle).await;
            }
            drop(permit);
        });
    }
}

/// Copies both ways until either side closes or the connection idles.
async fn splice(client: TcpStream, upstream: TcpStream, idle: Duration) {
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    tokio::join!(
        copy(client_read, upstream_write, idle),
        copy(upstream_read, client_write, idle),
    );
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    idle: Duration,
) {
    let mut buffer = vec![0u8; BUFFER];
    loop {
        match tokio::time::timeout(idle, from.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                let written = tokio::time::timeout(idle, to.write_all(&buffer[..n])).await;
                if !matches!(written, Ok(Ok(()))) {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}
