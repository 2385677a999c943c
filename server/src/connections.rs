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
//! A connection the server ends is closed the way RFC 9112 §9.6 asks: the answer is sent,
//! the write side shut (FIN), and what the client still sends is read and dropped for at
//! most [`LINGER_FOR`] and [`LINGER_BYTES`] before the socket is closed. A client that
//! writes its whole request before reading (a body past `MAX_BODY_BYTES`, headers past
//! `MAX_HEADER_BYTES`) then reads its 413 or 431 instead of a reset, which a close with
//! unread bytes would send. A connection closed for being slow or silent (the header
//! timeout, the request timeout's 408) is not drained: nothing waits for an answer there,
//! and a slow client costs what it did. Once the server is stopping, the drain is brief.
//!
//! A peer is taken in its canonical form from the start: an IPv4 client of a dual-stack
//! listener (`::ffff:a.b.c.d`) is that IPv4 client for every limit (`crate::client_addr`).

use std::{
    collections::HashMap,
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::{
        atomic::{AtomicU16, Ordering},
        Arc,
    },
    time::Duration,
};

use axum::{extract::ConnectInfo, http::StatusCode, Router};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::rt::{TokioIo, TokioTimer};
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
/// The longest a connection the server ends is drained after its last answer: enough for
/// a client to finish writing a refused request and read the answer, short enough that a
/// client trickling bytes holds its place for no longer.
const LINGER_FOR: Duration = Duration::from_secs(2);
/// The most a connection the server ends is drained of: a refused body of several times
/// `MAX_BODY_BYTES`'s default; past it the socket is closed whatever the client sends.
const LINGER_BYTES: usize = 4 << 20;
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
            serve_one(stream, service, &limits, stopping).await;
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

/// One connection, until it ends, outlives its lifetime, or the server stops; then closed,
/// drained first unless it ended for being slow (see the module's documentation).
async fn serve_one<S>(
    stream: TcpStream,
    service: S,
    limits: &ConnectionLimits,
    stopping: CancellationToken,
) where
    S: tower::Service<axum::http::Request<Incoming>, Response = axum::response::Response>
        + Clone
        + Send
        + Unpin
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes);
    let service = Watched::new(service);
    let last_status = service.last_status.clone();
    let mut connection = builder.serve_connection(TokioIo::new(stream), service);
    let served = tokio::select! {
        ended = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => Ok(ended),
        () = tokio::time::sleep(limits.lifetime()) => Err(limits.header_read_timeout),
        () = stopping.cancelled() => Err(DRAIN_WITHIN),
    };
    let grace = match served {
        Ok(ended) => {
            let stream = connection.into_parts().io.into_inner();
            return close(stream, ended, &last_status, &stopping).await;
        }
        Err(grace) => grace,
    };
    // Close after the request in flight; a client that does not read its answer is
    // dropped when the grace runs out.
    std::pin::Pin::new(&mut connection).graceful_shutdown();
    let finished = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx));
    if let Ok(ended) = tokio::time::timeout(grace, finished).await {
        let stream = connection.into_parts().io.into_inner();
        close(stream, ended, &last_status, &stopping).await;
    }
}

/// Closes a connection hyper is done with, drained first for as long as [`drain_for`] says.
async fn close(
    stream: TcpStream,
    ended: Result<(), hyper::Error>,
    last_status: &AtomicU16,
    stopping: &CancellationToken,
) {
    let within = drain_for(
        &ended,
        last_status.load(Ordering::Relaxed),
        stopping.is_cancelled(),
    );
    log_end(ended);
    match within {
        Some(within) => drain_and_close(stream, within, LINGER_BYTES).await,
        None => drop(stream),
    }
}

/// How long a connection hyper is done with is drained before it is closed: not at all
/// when it ended for being slow (hyper's header timeout, or the request timeout's 408),
/// since nothing there waits for an answer and a slow client must cost no more; briefly
/// once the server is stopping; else [`LINGER_FOR`].
fn drain_for(
    ended: &Result<(), hyper::Error>,
    last_status: u16,
    stopping: bool,
) -> Option<Duration> {
    let slow = ended.as_ref().is_err_and(hyper::Error::is_timeout)
        || last_status == StatusCode::REQUEST_TIMEOUT.as_u16();
    match (slow, stopping) {
        (true, _) => None,
        (false, true) => Some(SHED_LINGER),
        (false, false) => Some(LINGER_FOR),
    }
}

/// Shuts the write side (the answer is followed by a FIN), then reads and drops what the
/// client still sends, until it closes, `within` passes or `most` bytes came; then closes.
async fn drain_and_close(mut stream: TcpStream, within: Duration, most: usize) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 8192];
    let mut left = most;
    let _ = tokio::time::timeout(within, async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// A tower service as hyper's, keeping the status of the connection's last answer (the
/// drain depends on it) and boxing its future: hyper hands the connection's socket back
/// (`poll_without_shutdown`, for the drain) only for services and futures that are
/// `Unpin`, which the router's are not known to be.
#[derive(Clone)]
struct Watched<S> {
    service: S,
    last_status: Arc<AtomicU16>,
}

impl<S> Watched<S> {
    fn new(service: S) -> Self {
        Self {
            service,
            last_status: Arc::new(AtomicU16::new(0)),
        }
    }
}

type BoxedAnswer = std::pin::Pin<
    Box<
        dyn Future<
                Output = Result<axum::response::Response, Box<dyn std::error::Error + Send + Sync>>,
            > + Send,
    >,
>;

impl<S> hyper::service::Service<axum::http::Request<Incoming>> for Watched<S>
where
    S: tower::Service<axum::http::Request<Incoming>, Response = axum::response::Response>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = axum::response::Response;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = BoxedAnswer;

    fn call(&self, request: axum::http::Request<Incoming>) -> Self::Future {
        let (service, last_status) = (self.service.clone(), self.last_status.clone());
        Box::pin(async move {
            let answer = service.oneshot(request).await.map_err(Into::into)?;
            // Only an answer that closes the connection can be its last one; any other
            // leaves none, so an answer hyper writes itself later (a 431) is drained.
            let closes = answer
                .headers()
                .get(axum::http::header::CONNECTION)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            let status = if closes { answer.status().as_u16() } else { 0 };
            last_status.store(status, Ordering::Relaxed);
            Ok(answer)
        })
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
    drain_and_close(stream, SHED_LINGER, LINGER_BYTES).await;
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
    fn a_slow_client_is_not_drained_and_a_stopping_server_drains_briefly() {
        assert_eq!(drain_for(&Ok(()), 408, false), None);
        assert_eq!(drain_for(&Ok(()), 413, false), Some(LINGER_FOR));
        assert_eq!(drain_for(&Ok(()), 0, false), Some(LINGER_FOR));
        assert_eq!(drain_for(&Ok(()), 413, true), Some(SHED_LINGER));
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
