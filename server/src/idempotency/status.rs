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
use crate::{error::ApiError, session::Shopper, startup::AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/idempotency-keys/{key}", get(show))
}

#[derive(Serialize)]
struct KeyStatus {
    key: String,
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_status: Option<i16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
}

async fn show(State(db): State<PgPool>, shopper: Shopper, Path(raw): Path<String>) -> Result<Json<KeyStatus>, ApiError> {
    let key = IdempotencyKey::parse(&raw)?;
    let row: Option<(String, Option<i16>, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT state, response_status, response_headers FROM idempotency_keys WHERE scope = $1 AND key = $2",
    )
    .bind(&shopper.id)
    .bind(key.as_str())
    .fetch_optional(&db)
    .await?;
    let (state, response_status, headers) = row.ok_or(ApiError::NotFound)?;
    let location = headers.and_then(|h| h["location"].as_str().map(str::to_owned));
    Ok(Json(KeyStatus { key: key.to_string(), state, response_status, location }))
}
