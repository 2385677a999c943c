//! `GET /api/idempotency-keys/{key}`: the state of the caller's own request, for polling
//! after a 409, or waiting for it to finish (`Prefer: wait=N`, a long poll). Keys of other
//! sessions are invisible (404). The lookup is
//! `once_axum::status`'s; the route is the shop's, for its scope and its API reference.

use axum::{
    extract::{Path, State},
    http::HeaderMap,
    response::Response,
};
use once_axum::{
    status::{self, KeyState},
    Waits,
};
use sqlx::PgPool;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{error::ApiError, session::Shopper, state::AppState};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(show))
}

/// The state of a request made with this key, for polling after a 409
#[utoipa::path(
    get,
    path = "/idempotency-keys/{key}",
    operation_id = "get_idempotency_key",
    tag = "idempotency",
    params(("key" = String, Path, description = "An Idempotency-Key this session sent.",
        max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#),
        ("Prefer" = Option<String>, Header, description = "`wait=N`: answer when the key's request stops running, or after N seconds (at most the server's longest wait); the answer then says `Preference-Applied`.")),
    responses((status = 200, description = "The key's state.", body = KeyState,
        example = json!({"key": "8d0f6c1e-6f2a-4a8e-9d59-2f1f6b0f5b11", "state": "completed", "response_status": 201, "location": "/api/orders/5b1e2f0a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"}))),
    security((), ("session" = [])),
    extensions(("x-problems" = json!(["idempotency-key-malformed", "not-found", "server-stopping"]))),
)]
async fn show(
    State(db): State<PgPool>,
    State(waits): State<Waits>,
    shopper: Shopper,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    Ok(status::answer(&db, Some(&waits), &shopper.id, &raw, &headers).await?)
}
