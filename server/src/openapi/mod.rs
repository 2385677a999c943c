//! The API's OpenAPI 3.1 document, generated from the handlers (`#[utoipa::path]` next to
//! each one, collected by the routers as they register them), served at
//! `/api/openapi.json`, with a reference page at `/api/docs/` whose assets are inside the
//! binary (it works offline). docs/api.md is the guide to read beside it.

mod links;
pub mod problems;

use utoipa::{
    openapi::{
        security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme},
        OpenApi,
    },
    IntoParams, Modify,
};
use utoipa_swagger_ui::{Config, SwaggerUi};

/// Where the document and the page are served.
pub const DOCUMENT_PATH: &str = "/api/openapi.json";
pub const PAGE_PATH: &str = "/api/docs";

/// The security scheme every operation that needs a session names.
pub const SESSION: &str = "session";

/// The scheme `/metrics` names (spelled out in its `#[utoipa::path]`, which takes a literal).
pub const METRICS_TOKEN: &str = "metrics_token";

/// The header every write carries (docs/design.md, "The idempotency protocol").
#[derive(IntoParams)]
#[into_params(names("Idempotency-Key"), parameter_in = Header)]
pub struct IdempotencyKeyHeader(
    /// One key per intent, made by the client (a UUID is ideal), 1 to 255 visible ASCII
    /// characters, scoped to the session. Send the same key with every retry of the same
    /// request: the first completed answer is stored for 24 hours and replayed, marked
    /// `Idempotent-Replayed: true`. The same key with another valid body answers 422
    /// `idempotency-key-reused`; while the first request runs, 409 `request-in-progress`,
    /// unless the request also sends `Prefer: wait=N` (RFC 7240): it then waits up to N
    /// seconds (at most the server's longest wait) for the first request and gets its
    /// answer, saying `Preference-Applied: wait=M`. A request refused for its own form (a
    /// bad body, no session) leaves the key unused.
    #[param(
        max_length = 512,
        pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#
    )]
    #[allow(dead_code)]
    String,
);

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Once shop API",
        description = "Order and pay exactly once: every write takes an Idempotency-Key and \
            is safe to retry with it. Sessions are cookies (open one with GET /api/session); \
            errors are RFC 9457 problems (application/problem+json) whose `retryable` says \
            whether the same request with the same key can still succeed. The guide: \
            docs/api.md in the repository.",
        license(name = "MIT", identifier = "MIT"),
    ),
    tags(
        (name = "session", description = "The shopper's anonymous session (a cookie)."),
        (name = "catalog", description = "Products, prices and stock."),
        (name = "orders", description = "Orders, placed exactly once per Idempotency-Key."),
        (name = "payments", description = "Payments through the provider, charged exactly once per key."),
        (name = "idempotency", description = "The state of a key, for clients polling after a 409."),
        (name = "provider", description = "Callbacks from the payment provider (signed), applied once each."),
        (name = "metrics", description = "Counters and gauges for Prometheus, behind a bearer token."),
    ),
    components(schemas(crate::error::Problem)),
    modifiers(&SecuritySchemes),
)]
struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, doc: &mut OpenApi) {
        let cookie = ApiKeyValue::with_description(
            crate::session::COOKIE_NAME,
            "The shopper's session, set by any page or by GET /api/session. HttpOnly, \
             SameSite=Lax; a client keeps it like a browser does.",
        );
        let mut bearer = Http::new(HttpAuthScheme::Bearer);
        bearer.description = Some(
            "`METRICS_TOKEN`; when it is not configured, the server makes one at start and \
             prints it once."
                .into(),
        );
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(SESSION, SecurityScheme::ApiKey(ApiKey::Cookie(cookie)));
        components.add_security_scheme(METRICS_TOKEN, SecurityScheme::Http(bearer));
    }
}

/// The document's frame (info, tags, shared components); the routers add the paths.
pub fn base() -> OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// Completes the document the routers collected: each operation's problem responses, and
/// the links from an answer to the operations that follow it.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    problems::add_problem_responses(&mut doc);
    links::add_links(&mut doc);
    doc
}

/// The document and its reference page. Outside the session layers: reading the
/// reference opens no session.
pub fn router<S: Clone + Send + Sync + 'static>(doc: OpenApi) -> axum::Router<S> {
    let page = SwaggerUi::new(PAGE_PATH)
        .url(DOCUMENT_PATH, doc)
        // "none": the page never asks an online validator about the document.
        .config(Config::from(DOCUMENT_PATH).validator_url("none"));
    page.into()
}
