//! A deadline for server-rendered pages. Pages are rendered with streamed Suspense
//! boundaries, and the rendering library can, rarely and only under load, stall a
//! response's body for good after its first chunk (leptos-rs/leptos#4851): the shopper's
//! page would never finish loading. A page is read-only, so a stalled render is simply
//! dropped and the page rendered again; pages take milliseconds, so the HTML is collected
//! before it is sent. Anything that is not an HTML page passes through untouched.

use std::time::Duration;

use axum::{
    body::Body,
    extract::Request,
    http::{header, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// How long one rendering of a page may take before it counts as stalled.
const RENDER_LIMIT: Duration = Duration::from_secs(10);
/// Renderings of one request before giving up with a 503.
const ATTEMPTS: u32 = 3;
/// The largest page we collect.
const MAX_PAGE_BYTES: usize = 8 * 1024 * 1024;

/// Middleware: renders a GET page again when its body stalls.
pub async fn rerender_stalled(request: Request, next: Next) -> Response {
    if request.method() != Method::GET {
        return next.run(request).await;
    }
    let (parts, _) = request.into_parts();
    for attempt in 1..=ATTEMPTS {
        let again = Request::from_parts(parts.clone(), Body::empty());
        let response = next.clone().run(again).await;
        if !is_html(&response) {
            return response;
        }
        let (head, body) = response.into_parts();
        match tokio::time::timeout(RENDER_LIMIT, axum::body::to_bytes(body, MAX_PAGE_BYTES)).await {
            Ok(Ok(html)) => return Response::from_parts(head, Body::from(html)),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "a page could not be rendered");
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            Err(_) => {
                tracing::warn!(attempt, path = %parts.uri.path(), "page render stalled; rendering it again")
            }
        }
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "Please reload the page.",
    )
        .into_response()
}

fn is_html(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    };

    use axum::{middleware, routing::get, Router};
    use futures::StreamExt;
    use tower::ServiceExt;

    use super::*;

    /// A page whose first rendering stalls after its first chunk, as the library's does.
    fn flaky_page(renders: Arc<AtomicU32>) -> Router {
        let page = move || {
            let renders = renders.clone();
            async move {
                let first = renders.fetch_add(1, Ordering::SeqCst) == 0;
                let chunks = futures::stream::once(async { Ok::<_, std::io::Error>("<html>") })
                    .chain(futures::stream::once(async move {
                        if first {
                            std::future::pending::<()>().await;
                        }
                        Ok("</html>")
                    }));
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    Body::from_stream(chunks),
                )
            }
        };
        Router::new()
            .route("/", get(page))
            .layer(middleware::from_fn(rerender_stalled))
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_page_is_rendered_again_and_sent_whole() {
        let renders = Arc::new(AtomicU32::new(0));
        let response = flaky_page(renders.clone())
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let html = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&html[..], b"<html></html>");
        assert_eq!(
            renders.load(Ordering::SeqCst),
            2,
            "the stalled rendering was dropped"
        );
    }
}
