//! A request refused before its body arrived (a cross-site write's 403, a write without a
//! session's 400, a 429, a 413) leaves that body on the connection. The server cannot tell
//! where the next request would start, so it closes the connection after the answer; the
//! answer says so (`Connection: close`), or a client reusing the kept-alive connection
//! would meet an EOF on its next request instead of opening a new one.

use std::{
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
};

use axum::{
    body::{Body, Bytes, HttpBody},
    extract::Request,
    http::{header, HeaderValue, Version},
    middleware::Next,
    response::Response,
};
use http_body::{Frame, SizeHint};

/// Middleware, outermost: an answer given before the request's body was read to its end
/// closes the connection, and says so.
pub async fn close_if_unread(request: Request, next: Next) -> Response {
    // `Connection` is HTTP/1's; a request without a body leaves nothing behind.
    if request.version() > Version::HTTP_11 || request.body().is_end_stream() {
        return next.run(request).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(Watched {
            body,
            read: read.clone(),
        })
    });
    let mut response = next.run(request).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that tells when it has been read to its end.
struct Watched {
    body: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.body.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
