//! Serving connections with bounds that `axum::serve` does not offer: a connection must
//! send its request headers within `HEADER_READ_TIMEOUT_MS` or be closed, and at most
//! `MAX_CONNECTIONS` are served at once. Past the cap a new connection is answered
//! `503` problem+json with `Retry-After` and closed at once (load shedding), so a crowd
//! of slow or idle connections cannot take every file descriptor and the memory that
//! goes with them (docs/design.md, "Hostile traffic").

use std::{future::Future, sync::Arc, time::Duration};

use axum::{extract::ConnectInfo, Router};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto::Builder, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tower::ServiceExt;

/// How long a stop waits for open connections to finish their requests.
const DRAIN_WITHIN: Duration = Duration::from_secs(30);
/// How long a shed connection is read (and its bytes dropped) after the 503 is written,
/// so the client receives the answer instead of a reset.
const SHED_LINGER: Duration = Duration::from_millis(200);
/// After an accept error (no file descriptor left), a pause before the next accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const SHED_BODY: &str = r#"{"type":"https://once.example/problems/service-unavailable","title":"Service Unavailable","status":503,"detail":"the server is serving as many connections as it can; try again shortly","retryable":true}"#;

#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open connections
/// finish (for at most [`DRAIN_WITHIN`]).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let builder = Arc::new(builder(limits));
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
        let Ok(permit) = open.clone().try_acquire_owned() else {
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
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        let first_byte_within = limits.header_read_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            // hyper's header timer starts only once the connection has sent something: a
            // connection that sends nothing at all is closed here.
            if !sends_within(&stream, first_byte_within).await {
                return;
            }
            let connection = builder.serve_connection_with_upgrades(
                TokioIo::new(stream),
                TowerToHyperService::new(service),
            );
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_WITHIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain period; closing them");
    }
    Ok(())
}

/// Whether the connection sends its first byte within `within` (the byte stays unread).
async fn sends_within(stream: &TcpStream, within: Duration) -> bool {
    let mut first = [0u8; 1];
    matches!(
        tokio::time::timeout(within, stream.peek(&mut first)).await,
        Ok(Ok(n)) if n > 0
    )
}

/// HTTP/1.1 and HTTP/2, with the header-read timeout (which needs hyper's timer).
fn builder(limits: ConnectionLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_read_timeout));
    builder
}

/// The answer for a connection past the cap: 503, then closed.
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
