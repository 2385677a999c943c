//! `GET /api/idempotency-keys/{key}`: the state of the caller's own request, for polling
//! after a 409. Keys of other sessions are invisible (404).

use axum::{
    extract::{Path, State},
    routing::get,
    Json, Router,
};
use serde::Serialize;
use sqlx::PgPool;

use super::key::IdempotencyKey;
use crate::{error::ApiError, session::Shopper, state::AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/idempotency-keys/{key}", get(show))
}

#[derive(Serialize)]
pub struct KeyStatus {
    pub key: String,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<i16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

async fn show(
    State(db): State<PgPool>,
    shopper: Shopper,
    Path(raw): Path<String>,
) -> Result<Json<KeyStatus>, ApiError> {
    let key = IdempotencyKey::parse(&raw)?;
    lookup(&db, &shopper.id, &key)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// The state of `key` in `scope`, or `None` if this scope never used it (or it was purged).
pub async fn lookup(
    db: &PgPool,
    scope: &str,
    key: &IdempotencyKey,
) -> Result<Option<KeyStatus>, sqlx::Error> {
    let row: Option<(String, Option<i16>, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT state, response_status, response_headers FROM idempotency_keys WHERE scope = $1 AND key = $2",
    )
    .bind(scope)
    .bind(key.as_str())
    .fetch_optional(db)
    .await?;
    Ok(row.map(|(state, response_status, headers)| KeyStatus {
        key: key.to_string(),
        state,
        response_status,
        location: headers.and_then(|h| h["location"].as_str().map(str::to_owned)),
    }))
}
