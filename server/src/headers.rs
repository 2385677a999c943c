//! The headers every answer carries, because a checkout is worth attacking: a page of another
//! site must not frame the shop (its Pay button under a decoy), a browser must not guess a
//! content type, an address with an order id must not leak to other sites as a Referer, and
//! no personal page or API answer may be kept by a shared cache or the back-forward cache of
//! a shared computer.
//!
//! The content security policy lets a page run only the shop's own scripts: those under
//! `/pkg/` and the inline hydration scripts Leptos writes, which carry a nonce made afresh
//! for each answer ([`CspNonce`], handed to Leptos by `ssr`); with Stripe, a page also runs
//! Stripe.js from its one origin (`STRIPE_JS_URL`), which may call Stripe's API and frame
//! Stripe's card field ([`Protection::for_stripe_js`]). The wasm module is compiled
//! under `'wasm-unsafe-eval'`, never `'unsafe-eval'`. Styles come from the shop's stylesheet
//! only. The API reference (`/api/docs`, Swagger UI) keeps inline styles. An answer that sets
//! a header itself (the sandboxed email view sets its own policy) keeps it. The built site
//! under `/pkg/` stays cacheable.

use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};

/// The policy of every answer that is no page: no inline script at all, styles from the
/// shop's stylesheet only. Written out once, so that it costs no work per answer.
pub const POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
    form-action 'self'; base-uri 'self'; object-src 'none'";
/// The API reference's policy: [`POLICY`] with inline styles (Swagger UI sets them).
pub const REFERENCE_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'";
const REFERENCE_PATH: &str = "/api/docs";

/// The nonce of one answer's inline scripts, in the request's extensions.
#[derive(Clone, Debug)]
pub struct CspNonce(pub String);

impl CspNonce {
    fn fresh() -> Self {
        Self(hex::encode(rand::random::<[u8; 16]>()))
    }
}

/// Where the nonce goes in [`Protection::page_policy`].
const NONCE: &str = "{nonce}";

/// The policy of an answer; a page's inline scripts carry `nonce`, and an answer that is no
/// page (JSON, the built site, a server function's reply) runs no inline script at all.
fn policy(protection: &Protection, nonce: Option<&CspNonce>, path: &str) -> HeaderValue {
    match nonce {
        None if path.starts_with(REFERENCE_PATH) => HeaderValue::from_static(REFERENCE_POLICY),
        None => HeaderValue::from_static(POLICY),
        Some(CspNonce(nonce)) => {
            let page = protection.page_policy.replacen(NONCE, nonce, 1);
            HeaderValue::from_str(&page).expect("a hex nonce keeps the policy a header value")
        }
    }
}

/// What the headers depend on. How the shop reaches its shoppers: over HTTPS
/// (`SERVED_OVER_HTTPS`, TLS ended by the server's proxy) or not; over HTTPS, every answer
/// tells the browser to use nothing else for a year (HSTS), and the session cookies are
/// `Secure` (`session`). And the pages' policy, with the nonce's place in it.
#[derive(Clone, Debug)]
pub struct Protection {
    pub https: bool,
    page_policy: std::sync::Arc<str>,
}

impl Protection {
    /// The shop's own scripts only.
    pub fn new(https: bool) -> Self {
        let scripts = format!("script-src 'self' 'nonce-{NONCE}'");
        let page_policy = POLICY.replacen("script-src 'self'", &scripts, 1);
        Self {
            https,
            page_policy: page_policy.into(),
        }
    }

    /// Pages may also run Stripe.js from `js_url`'s origin, and nothing else: it calls
    /// Stripe's API at that origin (Stripe's own script calls `api.stripe.com`) and frames
    /// its card field from it (Stripe's own, from `js.stripe.com` and `hooks.stripe.com`).
    pub fn for_stripe_js(https: bool, js_url: &str) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(js_url)?;
        let origin = url.origin().ascii_serialization();
        let stripes_own = origin == "https://js.stripe.com";
        // Stripe's card field runs in frames of js.stripe.com's subdomains.
        let (api, frames) = if stripes_own {
            (
                " https://api.stripe.com",
                " https://*.js.stripe.com https://hooks.stripe.com",
            )
        } else {
            ("", "")
        };
        let page_policy = Self::new(https)
            .page_policy
            .replacen(NONCE_SOURCE, &format!("{NONCE_SOURCE} {origin}"), 1)
            .replacen(
                "connect-src 'self'",
                &format!("connect-src 'self' {origin}{api}"),
                1,
            )
            .replacen(
                "frame-ancestors",
                &format!("frame-src {origin}{frames}; frame-ancestors"),
                1,
            );
        Ok(Self {
            https,
            page_policy: page_policy.into(),
        })
    }
}

/// The nonce's source in a page's `script-src`.
const NONCE_SOURCE: &str = "'nonce-{nonce}'";

const HSTS: &str = "max-age=31536000; includeSubDomains";

/// Middleware: adds the headers to every answer that does not set them itself.
pub async fn protective(
    State(protection): State<Protection>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let under_pkg = path.starts_with("/pkg/");
    // Only a page read renders inline scripts: the hot API paths make no nonce.
    let page = request.method().is_safe() && !under_pkg && !path.starts_with("/api/");
    let nonce = page.then(CspNonce::fresh);
    let policy = policy(&protection, nonce.as_ref(), path);
    if let Some(nonce) = nonce {
        request.extensions_mut().insert(nonce);
    }
    let mut response = next.run(request).await;
    // A file of the built site; a miss there is the app's 404 page, personal like any page.
    let static_asset = under_pkg && response.status().is_success();
    let headers = response.headers_mut();
    set_if_absent(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if protection.https {
        set_if_absent(headers, header::STRICT_TRANSPORT_SECURITY, HSTS);
    }
    set_if_absent(headers, header::X_FRAME_OPTIONS, "DENY");
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn page(protection: &Protection) -> String {
        let nonce = CspNonce("abc".into());
        let policy = policy(protection, Some(&nonce), "/orders/1");
        policy.to_str().unwrap().to_owned()
    }

    #[test]
    fn pages_run_the_shops_scripts_and_stripe_js_from_its_one_origin() {
        assert_eq!(
            page(&Protection::new(false)),
            POLICY.replacen("script-src 'self'", "script-src 'self' 'nonce-abc'", 1)
        );
        let stripe = Protection::for_stripe_js(true, "https://js.stripe.com/v3/").unwrap();
        assert_eq!(
            page(&stripe),
            "default-src 'self'; script-src 'self' 'nonce-abc' https://js.stripe.com \
             'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; connect-src 'self' \
             https://js.stripe.com https://api.stripe.com; frame-src https://js.stripe.com \
             https://*.js.stripe.com https://hooks.stripe.com; frame-ancestors 'none'; \
             form-action 'self'; base-uri 'self'; object-src 'none'"
        );
        let fake =
            Protection::for_stripe_js(false, "http://127.0.0.1:9/js.stripe.com/v3/").unwrap();
        assert!(page(&fake).contains("script-src 'self' 'nonce-abc' http://127.0.0.1:9 'wasm"));
        assert!(!page(&fake).contains("stripe.com"));
    }
}
