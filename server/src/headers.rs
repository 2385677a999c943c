//! The headers every answer carries, because a checkout is worth attacking: a page of another
//! site must not frame the shop (its Pay button under a decoy), a browser must not guess a
//! content type, an address with an order id must not leak to other sites as a Referer, and
//! no personal page or API answer may be kept by a shared cache or the back-forward cache of
//! a shared computer.
//!
//! The content security policy lets a page run only the shop's own scripts: those under
//! `/pkg/` and the inline hydration scripts Leptos writes, which carry a nonce made afresh
//! for each answer ([`CspNonce`], handed to Leptos by `ssr`). The wasm module is compiled
//! under `'wasm-unsafe-eval'`, never `'unsafe-eval'`. Styles come from the shop's stylesheet
//! only. The API reference (`/api/docs`, Swagger UI) keeps inline styles. An answer that sets
//! a header itself (the sandboxed email view sets its own policy) keeps it. The built site
//! under `/pkg/` stays cacheable.

use std::sync::LazyLock;

use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};

/// What every policy says, whatever the page.
const FRAMING_AND_FORMS: &str =
    "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'";
const REFERENCE_PATH: &str = "/api/docs";

/// The nonce of one answer's inline scripts, in the request's extensions.
#[derive(Clone, Debug)]
pub struct CspNonce(pub String);

impl CspNonce {
    fn fresh() -> Self {
        Self(hex::encode(rand::random::<[u8; 16]>()))
    }
}

/// The policy of an answer; a page's inline scripts carry `nonce`, and an answer that is no
/// page (JSON, the built site, a server function's reply) runs no inline script at all.
fn policy(nonce: Option<&CspNonce>, path: &str) -> Option<HeaderValue> {
    let reference = path.starts_with(REFERENCE_PATH);
    let Some(nonce) = nonce else {
        // The same two policies serve every answer that is no page: written once.
        static PLAIN: LazyLock<Option<HeaderValue>> = LazyLock::new(|| policy_value("", false));
        static REFERENCE: LazyLock<Option<HeaderValue>> =
            LazyLock::new(|| policy_value("", true));
        let kept: &Option<HeaderValue> = if reference { &REFERENCE } else { &PLAIN };
        return kept.clone();
    };
    policy_value(&format!(" 'nonce-{}'", nonce.0), reference)
}

fn policy_value(nonce_source: &str, reference: bool) -> Option<HeaderValue> {
    let styles = if reference {
        "style-src 'self' 'unsafe-inline'"
    } else {
        "style-src 'self'"
    };
    HeaderValue::from_str(&format!(
        "default-src 'self'; script-src 'self'{nonce_source} 'wasm-unsafe-eval'; {styles}; \
         img-src 'self' data:; connect-src 'self'; {FRAMING_AND_FORMS}"
    ))
    .ok()
}

/// How the shop reaches its shoppers: over HTTPS (`SERVED_OVER_HTTPS`, TLS ended by the
/// server's proxy) or not. Over HTTPS, every answer tells the browser to use nothing else
/// for a year (HSTS), and the session cookies are `Secure` (`session`).
#[derive(Clone, Copy, Debug)]
pub struct Transport {
    pub https: bool,
}

const HSTS: &str = "max-age=31536000; includeSubDomains";

/// Middleware: adds the headers to every answer that does not set them itself.
pub async fn protective(
    State(transport): State<Transport>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let under_pkg = path.starts_with("/pkg/");
    // Only a page read renders inline scripts: the hot API paths make no nonce.
    let page = request.method().is_safe() && !under_pkg && !path.starts_with("/api/");
    let nonce = page.then(CspNonce::fresh);
    let policy = policy(nonce.as_ref(), path);
    if let Some(nonce) = nonce {
        request.extensions_mut().insert(nonce);
    }
    let mut response = next.run(request).await;
    // A file of the built site; a miss there is the app's 404 page, personal like any page.
    let static_asset = under_pkg && response.status().is_success();
    let headers = response.headers_mut();
    set_if_absent(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if transport.https {
        set_if_absent(headers, header::STRICT_TRANSPORT_SECURITY, HSTS);
    }
    set_if_absent(headers, header::X_FRAME_OPTIONS, "DENY");
    if let (Some(policy), false) = (
        policy,
        headers.contains_key(header::CONTENT_SECURITY_POLICY),
    ) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
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
