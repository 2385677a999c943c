//! Writes from a browser must come from the shop's own pages. A page on another site can
//! make a shopper's browser post a form (or a `fetch` without CORS) to the shop; the
//! session cookie is `SameSite=Lax`, so it stays behind, but the request still arrives and
//! would act. Every state-changing request is therefore checked for where it came from:
//!
//! * `Sec-Fetch-Site` (sent by every current browser): only `same-origin` (and `none`, a
//!   request the user made themselves) passes; `same-site` (another port, another
//!   subdomain) and `cross-site` are refused;
//! * otherwise `Origin`, when present, must name the host the request was sent to;
//! * a request with neither comes from a program, not a browser page (curl, the API's
//!   clients, the tests), and the session, key and signature rules decide as before.
//!
//! A refusal acts on nothing: 403 problem+json `cross-site-request` for API clients and
//! script calls, and for a form posted without wasm a plain page that says so.

use axum::{
    extract::Request,
    http::{header, HeaderMap, StatusCode},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};

use crate::error::ApiError;

/// Middleware: refuses a write that a page of another origin sent.
pub async fn same_origin_writes(request: Request, next: Next) -> Response {
    if request.method().is_safe() || from_own_origin(request.headers()) {
        return next.run(request).await;
    }
    tracing::warn!(
        method = %request.method(), uri = %request.uri(),
        origin = ?request.headers().get(header::ORIGIN),
        "refused a write sent by another site's page"
    );
    if is_plain_form(request.headers()) {
        refused_page()
    } else {
        ApiError::CrossSite.into_response()
    }
}

/// Middleware: every redirect the shop answers with stays on the shop. A server function
/// posted by a form without wasm is sent back to its page by the `Referer` (Leptos does
/// so), and a `Referer` is whatever the sending page chose: another site, `javascript:`.
/// A `Location` that is not one of the shop's own paths becomes the home page.
pub async fn same_origin_redirects(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).cloned();
    let mut response = next.run(request).await;
    if let Some(location) = response.headers().get(header::LOCATION) {
        let host = host.as_ref().map(|h| h.as_bytes());
        let path = own_path(location.as_bytes(), host).map(<[u8]>::to_vec);
        let safe = match path.and_then(|p| header::HeaderValue::from_bytes(&p).ok()) {
            Some(path) => path,
            None => {
                tracing::warn!(location = ?location, "a redirect off the shop became one to its home page");
                header::HeaderValue::from_static("/")
            }
        };
        response.headers_mut().insert(header::LOCATION, safe);
    }
    response
}

/// The shop path a `Location` leads to: a path of its own (`/orders`, not `//evil.test`),
/// or an absolute address on the request's own host, reduced to its path.
fn own_path<'a>(location: &'a [u8], host: Option<&[u8]>) -> Option<&'a [u8]> {
    let text = std::str::from_utf8(location).ok()?;
    let path = match without_scheme(text) {
        Some(rest) => {
            let at = rest.find('/').unwrap_or(rest.len());
            let path = (Some(&rest.as_bytes()[..at]) == host).then_some(&rest[at..])?;
            if path.is_empty() {
                "/"
            } else {
                path
            }
        }
        None => text,
    };
    let own = path.starts_with('/')
        && !path.starts_with("//")
        && !path.starts_with("/\\")
        && path.bytes().all(|b| b.is_ascii_graphic());
    own.then_some(path.as_bytes())
}

/// Whether the headers a browser adds say the request came from the shop's own pages (or
/// from no page at all).
pub fn from_own_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return matches!(site.as_bytes(), b"same-origin" | b"none");
    }
    match headers.get(header::ORIGIN) {
        None => true,
        Some(origin) => {
            let host = headers.get(header::HOST).map(|h| h.as_bytes());
            authority_of(origin.as_bytes()).is_some_and(|authority| Some(authority) == host)
        }
    }
}

/// Whether a read was embedded by a page of another site (an image, a script, a `fetch`):
/// the browser says so (`Sec-Fetch-Site: cross-site`, any mode but `navigate`). Such a read
/// never opens a session: the session cookie stays behind on it (`SameSite=Lax`), so a page
/// with hundreds of images of the shop would make every visitor open hundreds of sessions,
/// using up what their address may open (`session::open_session`).
pub fn embedded_by_another_site(headers: &HeaderMap) -> bool {
    let site = headers.get("sec-fetch-site").map(|v| v.as_bytes());
    let mode = headers.get("sec-fetch-mode").map(|v| v.as_bytes());
    site == Some(b"cross-site") && mode != Some(b"navigate")
}

/// `host[:port]` of an origin such as `http://127.0.0.1:3000`; `None` for `null` or junk.
fn authority_of(origin: &[u8]) -> Option<&[u8]> {
    let rest = without_scheme(std::str::from_utf8(origin).ok()?)?;
    (!rest.is_empty() && !rest.contains('/')).then_some(rest.as_bytes())
}

/// What follows `http://` or `https://`; `None` for any other text.
fn without_scheme(text: &str) -> Option<&str> {
    text.strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
}

/// A form a browser posted without wasm: it expects a page, not a problem document.
fn is_plain_form(headers: &HeaderMap) -> bool {
    let has = |name, needle: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(needle))
    };
    has(header::ACCEPT, "text/html")
        && (has(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            || has(header::CONTENT_TYPE, "multipart/form-data"))
}

fn refused_page() -> Response {
    let page = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
        <title>Not sent from the shop · Once</title></head><body>\
        <h1>This form did not come from the shop</h1>\
        <p>Another site sent it on your behalf, so the shop did nothing with it. \
        Your cart, orders and payments are unchanged.</p>\
        <p><a href=\"/\">Go to the shop</a></p></body></html>";
    (StatusCode::FORBIDDEN, Html(page)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_browser_says_where_a_request_came_from() {
        assert!(from_own_origin(&headers(&[(
            "sec-fetch-site",
            "same-origin"
        )])));
        assert!(from_own_origin(&headers(&[("sec-fetch-site", "none")])));
        assert!(!from_own_origin(&headers(&[(
            "sec-fetch-site",
            "same-site"
        )])));
        assert!(!from_own_origin(&headers(&[(
            "sec-fetch-site",
            "cross-site"
        )])));
        // Sec-Fetch-Site decides over a matching Origin.
        assert!(!from_own_origin(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://shop.test"),
            ("host", "shop.test"),
        ])));
    }

    #[test]
    fn only_the_shops_own_paths_are_redirected_to() {
        let host = Some(&b"shop.test:3000"[..]);
        let path = |l: &'static str| own_path(l.as_bytes(), host).map(|p| p.to_vec());
        assert_eq!(path("/orders?x=1"), Some(b"/orders?x=1".to_vec()));
        assert_eq!(path("http://shop.test:3000/cart"), Some(b"/cart".to_vec()));
        assert_eq!(path("http://shop.test:3000"), Some(b"/".to_vec()));
        for off in [
            "http://evil.test/",
            "https://shop.test:3000.evil.test/",
            "//evil.test/",
            "/\\evil.test/",
            "javascript:alert(1)",
            "orders",
            "",
        ] {
            assert_eq!(path(off), None, "{off}");
        }
    }

    #[test]
    fn without_sec_fetch_site_the_origin_must_be_the_host() {
        let own = [
            ("origin", "http://shop.test:3000"),
            ("host", "shop.test:3000"),
        ];
        assert!(from_own_origin(&headers(&own)));
        let other = [("origin", "http://evil.test"), ("host", "shop.test:3000")];
        assert!(!from_own_origin(&headers(&other)));
        let port = [
            ("origin", "http://shop.test:3001"),
            ("host", "shop.test:3000"),
        ];
        assert!(!from_own_origin(&headers(&port)));
        assert!(!from_own_origin(&headers(&[
            ("origin", "null"),
            ("host", "shop.test")
        ])));
        // A program sends neither header.
        assert!(from_own_origin(&headers(&[("host", "shop.test")])));
    }
}
