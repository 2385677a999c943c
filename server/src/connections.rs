//! Serving connections with bounds that `axum::serve` does not offer (docs/design.md,
//! "Hostile traffic"), so that a crowd of slow, idle or stalled connections cannot take
//! every file descriptor and the memory that goes with them:
//!
//! * a request's line and headers may take `MAX_HEADER_BYTES`; past it, 431 and closed;
//! * HTTP/1.1 only (a proxy in front speaks HTTP/2 to browsers): hyper's header timer then
//!   runs from the connection's first moment, so a connection must send each request's
//!   headers within `HEADER_READ_TIMEOUT_MS` of being opened or idle, or it is closed;
//! * a connection lives at most `REQUEST_TIMEOUT_MS + HEADER_READ_TIMEOUT_MS`: then it is
//!   asked to close after its request in flight, and dropped a header timeout later. A
//!   client that stops reading its answer holds a place no longer than that;
//! * at most `MAX_CONNECTIONS` are served at once, and at most `MAX_CONNECTIONS_PER_CLIENT`
//!   from one client (its IPv4 address or its IPv6 /64, as the rate limits count; trusted
//!   proxies excepted). Past either a new connection is answered `503` problem+json with
//!   `Retry-After` and closed (load shedding).
//!
//! A peer is taken in its canonical form from the start: an IPv4 client of a dual-stack
//! listener (`::ffff:a.b.c.d`) is that IPv4 client for every limit (`crate::client_addr`).

use std::{
    collections::HashMap,
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use axum::{extract::ConnectInfo, Router};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::client_addr::{bucket_of, TrustedProxies};

/// How long a stop waits for open connections to finish their requests.
const DRAIN_WITHIN: Duration = Duration::from_secs(30);
/// How long a shed connection is read (and its bytes dropped) after the 503 is written,
/// so the client receives the answer instead of a reset.
const SHED_LINGER: Duration = Duration::from_millis(200);
/// After an accept error (no file descriptor left), a pause before the next accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const SHED_BODY: &str = r#"{"type":"https://once.example/problems/service-unavailable","title":"Service Unavailable","status":503,"detail":"the server is serving as many connections as it can; try again shortly","retryable":true}"#;

#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
    pub max_per_client: usize,
    /// The read buffer's bound: a request's line and headers larger than this are answered
    /// 431 and the connection closed, so a connection holds at most this much while its
    /// headers never end (hyper's own bound is about 400 KB).
    pub max_header_bytes: usize,
    pub trusted_proxies: TrustedProxies,
}

impl ConnectionLimits {
    fn lifetime(&self) -> Duration {
        self.request_timeout + self.header_read_timeout
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open connections
/// finish their requests (for at most [`DRAIN_WITHIN`]).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let per_client = PerClient::default();
    let stopping = CancellationToken::new();
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; pausing");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        // Answers go out at once, not held back to be merged with the next segment
        // (without it, a request on a kept-alive connection waits for a delayed ACK).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tokio::spawn(shed(stream));
            continue;
        };
        let Some(place) = per_client.admit(peer.ip(), &limits) else {
            tokio::spawn(shed(stream));
            continue;
        };
        let service =
            router
                .clone()
                .map_request(move |mut request: axum::http::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    request
                });
        let (limits, stopping) = (limits.clone(), stopping.clone());
        tokio::spawn(async move {
            let _held = (permit, place);
            serve_one(stream, TowerToHyperService::new(service), &limits, stopping).await;
        });
    }
    drop(listener);
    stopping.cancel();
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN_WITHIN, open.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain period; closing them");
    }
    Ok(())
}

/// One connection, until it ends, outlives its lifetime, or the server stops.
async fn serve_one<S>(
    stream: TcpStream,
    service: S,
    limits: &ConnectionLimits,
    stopping: CancellationToken,
) where
    S: hyper::service::HttpService<Incoming>,
    S::ResBody: 'static + Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let grace = tokio::select! {
        ended = connection.as_mut() => return log_end(ended),
        () = tokio::time::sleep(limits.lifetime()) => limits.header_read_timeout,
        () = stopping.cancelled() => DRAIN_WITHIN,
    };
    // Close after the request in flight; a client that does not read its answer is
    // dropped when the grace runs out.
    connection.as_mut().graceful_shutdown();
    if let Ok(ended) = tokio::time::timeout(grace, connection).await {
        log_end(ended);
    }
}

fn log_end(ended: Result<(), hyper::Error>) {
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Open connections by client (`bucket_of`); a place is given back when its guard drops.
#[derive(Clone, Default)]
struct PerClient(Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>);

struct Place {
    map: PerClient,
    addr: Option<IpAddr>,
}

impl PerClient {
    /// A place for a connection from `peer`, counted against its client (`bucket_of`)
    /// unless it is a trusted proxy, which carries many clients.
    fn admit(&self, peer: IpAddr, limits: &ConnectionLimits) -> Option<Place> {
        let peer = peer.to_canonical();
        let counted = !limits.trusted_proxies.0.contains(&peer);
        self.take(bucket_of(peer), counted, limits.max_per_client)
    }

    /// A place for a connection from `addr`, unless it holds `max` already. An address
    /// that is not `counted` (a trusted proxy, which carries many clients) always gets one.
    fn take(&self, addr: IpAddr, counted: bool, max: usize) -> Option<Place> {
        if !counted {
            return Some(Place {
                map: self.clone(),
                addr: None,
            });
        }
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(addr).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Place {
            map: self.clone(),
            addr: Some(addr),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(addr) = self.addr else { return };
        let mut open = self.map.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&addr) {
            *count -= 1;
            if *count == 0 {
                open.remove(&addr);
            }
        }
    }
}

/// The answer for a connection past a cap: 503, then closed.
async fn shed(mut stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{SHED_BODY}",
        SHED_BODY.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(SHED_LINGER, async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_per_client: usize, trusted: &str) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            max_connections: 100,
            max_per_client,
            max_header_bytes: 16384,
            trusted_proxies: TrustedProxies::parse(trusted).unwrap(),
        }
    }

    fn peer(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn one_ipv6_64_is_one_client_and_a_mapped_ipv4_peer_is_its_ipv4_address() {
        let (open, limits) = (PerClient::default(), limits(2, ""));
        let held: Vec<Place> = ["2001:db8:1:2::1", "2001:db8:1:2::ffff"]
            .iter()
            .filter_map(|p| open.admit(peer(p), &limits))
            .collect();
        assert_eq!(held.len(), 2);
        assert!(open.admit(peer("2001:db8:1:2:abcd::9"), &limits).is_none());
        assert!(open.admit(peer("2001:db8:1:3::1"), &limits).is_some());
        let mapped: Vec<Place> = (0..2)
            .filter_map(|_| open.admit(peer("::ffff:192.0.2.1"), &limits))
            .collect();
        assert_eq!(mapped.len(), 2);
        assert!(
            open.admit(peer("192.0.2.1"), &limits).is_none(),
            "the same client"
        );
        assert!(open.admit(peer("::ffff:192.0.2.2"), &limits).is_some());
    }

    #[test]
    fn a_trusted_proxy_is_not_capped_on_either_listener() {
        let (open, limits) = (PerClient::default(), limits(1, "127.0.0.1"));
        let held: Vec<Place> = (0..5)
            .filter_map(|_| open.admit(peer("::ffff:127.0.0.1"), &limits))
            .collect();
        assert_eq!(held.len(), 5);
    }
}
