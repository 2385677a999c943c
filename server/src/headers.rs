//! The headers every answer carries, because a checkout is worth attacking: a page of another
//! site must not frame the shop (its Pay button under a decoy), a browser must not guess a
//! content type, an address with an order id must not leak to other sites as a Referer, and
//! no personal page or API answer may be kept by a shared cache or the back-forward cache of
//! a shared computer.
//!
//! The content security policy here restricts where the shop may be framed, where its forms
//! may post and what a `<base>` or `<object>` may do; it does not restrict scripts (the
//! hydration scripts are inline). An answer that sets a header itself (the sandboxed email
//! view sets its own policy) keeps it. The built site under `/pkg/` stays cacheable.

use axum::{
    extract::Request,
    http::{header, HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};

const POLICY: &str =
    "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'";

/// Middleware: adds the headers to every answer that does not set them itself.
pub async fn protective(request: Request, next: Next) -> Response {
    let under_pkg = request.uri().path().starts_with("/pkg/");
    let mut response = next.run(request).await;
    // A file of the built site; a miss there is the app's 404 page, personal like any page.
    let static_asset = under_pkg && response.status().is_success();
    let headers = response.headers_mut();
    set_if_absent(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set_if_absent(headers, header::X_FRAME_OPTIONS, "DENY");
    set_if_absent(headers, header::CONTENT_SECURITY_POLICY, POLICY);
    // Same-origin requests keep their Referer: a form posted without wasm is sent back to
    // its page by it.
    set_if_absent(headers, header::REFERRER_POLICY, "same-origin");
    if !static_asset {
        set_if_absent(headers, header::CACHE_CONTROL, "private, no-store");
    }
    response
}

fn set_if_absent(headers: &mut HeaderMap, name: HeaderName, value: &'static str) {
    headers
        .entry(name)
        .or_insert_with(|| HeaderValue::from_static(value));
}
