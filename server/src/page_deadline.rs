//! A deadline for server-rendered pages. Pages are rendered with Suspense boundaries, and
//! the rendering library can, rarely and only under load, stall a rendering for good
//! (leptos-rs/leptos#4851): after a streamed page's first chunk, or before the head of a
//! page rendered whole (`SsrMode::Async`, the checkout and an order), which never answers
//! at all. The shopper's page would never finish loading. A page is read-only, so a stalled
//! rendering is simply dropped and the page rendered again; pages take milliseconds, so the
//! HTML is collected before it is sent. Any other answer to a GET (a file, a server
//! function's) is passed on as it comes once its head is there.

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

/// Middleware: renders a GET page again when its rendering stalls, before its head (a page
/// rendered whole, `SsrMode::Async`, has no head until its body is done) or after it.
pub async fn rerender_stalled(request: Request, next: Next) -> Response {
    if request.method() != Method::GET {
        return next.run(request).await;
    }
    let (parts, _) = request.into_parts();
    for attempt in 1..=ATTEMPTS {
        let again = Request::from_parts(parts.clone(), Body::empty());
        match tokio::time::timeout(RENDER_LIMIT, render(next.clone(), again)).await {
            Ok(response) => return response,
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

/// One rendering: an HTML page collected whole, anything else passed on as it comes.
async fn render(next: Next, request: Request) -> Response {
    let response = next.run(request).await;
    if !is_html(&response) {
        return response;
    }
    let (head, body) = response.into_parts();
    match axum::body::to_bytes(body, MAX_PAGE_BYTES).await {
        Ok(html) => Response::from_parts(head, Body::from(html)),
        Err(e) => {
            tracing::error!(error = %e, "a page could not be rendered");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
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

    /// Where a page's first rendering stalls, as the library's can.
    #[derive(Clone, Copy)]
    enum Stall {
        /// Before the head: nothing is answered at all.
        BeforeHead,
        /// After the first chunk of the body.
        AfterFirstChunk,
    }

    fn flaky_page(renders: Arc<AtomicU32>, stall: Stall) -> Router {
        let page = move || {
            let renders = renders.clone();
            async move {
                let first = renders.fetch_add(1, Ordering::SeqCst) == 0;
                if first && matches!(stall, Stall::BeforeHead) {
                    std::future::pending::<()>().await;
                }
                let first = first && matches!(stall, Stall::AfterFirstChunk);
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

    async fn load(stall: Stall) -> (String, u32) {
        let renders = Arc::new(AtomicU32::new(0));
        // Time is paused: a load that never ends fails here, after a minute of it.
        let request = Request::get("/").body(Body::empty()).unwrap();
        let response = tokio::time::timeout(
            Duration::from_secs(60),
            flaky_page(renders.clone(), stall).oneshot(request),
        )
        .await
        .expect("the page within a minute")
        .unwrap();
        let html = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        (
            String::from_utf8(html.to_vec()).unwrap(),
            renders.load(Ordering::SeqCst),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_page_stalled_after_its_first_chunk_is_rendered_again_and_sent_whole() {
        assert_eq!(
            load(Stall::AfterFirstChunk).await,
            ("<html></html>".to_owned(), 2),
            "the stalled rendering was dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_page_stalled_before_its_head_is_rendered_again() {
        assert_eq!(
            load(Stall::BeforeHead).await,
            ("<html></html>".to_owned(), 2),
            "the stalled rendering was dropped"
        );
    }
}
