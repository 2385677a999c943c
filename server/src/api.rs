//! The routes the API reference documents: the shop API under `/api`, the provider's
//! callbacks, and `/metrics`. Each is registered together with its OpenAPI operation
//! (`routes!` reads the handler's `#[utoipa::path]`), so the document is built from the same
//! calls that route.

use axum::Router;
use utoipa::openapi::OpenApi;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    callbacks, catalog, checkout, error, idempotency, metrics, openapi, orders, payments, session,
    state::AppState,
};

pub struct Documented {
    /// `/api/…`, to be served behind the session layers.
    pub shop_api: Router<AppState>,
    /// `/webhooks/provider`, outside them.
    pub callbacks: Router<AppState>,
    /// `/metrics`, outside them too.
    pub metrics: Router<AppState>,
    pub document: OpenApi,
}

/// The routes and their document; of the providers' webhook routes, `webhook_path` only.
pub fn documented(webhook_path: &str) -> Documented {
    let shop_api = OpenApiRouter::new()
        .routes(routes!(session::show))
        .merge(catalog::router())
        .merge(orders::router())
        .merge(checkout::api_router())
        .merge(payments::router())
        .merge(idempotency::status::router())
        .fallback(error::api_not_found);
    let (shop_api, mut document) = OpenApiRouter::with_openapi(openapi::base())
        .nest("/api", shop_api)
        .split_for_parts();
    let (callbacks, callbacks_document) = callbacks::router(webhook_path).split_for_parts();
    document.merge(callbacks_document);
    let (metrics, metrics_document) = OpenApiRouter::new()
        .routes(routes!(metrics::render))
        .split_for_parts();
    document.merge(metrics_document);
    Documented {
        shop_api,
        callbacks,
        metrics,
        document: openapi::finish(document),
    }
}

/// The OpenAPI document, as `/api/openapi.json` serves it with the sandbox provider.
pub fn document() -> OpenApi {
    documented("/webhooks/provider").document
}
