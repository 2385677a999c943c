//! What a key holds, for a client polling after a 409: its state and, once completed, the
//! stored answer's status and location (never its body: repeating the request returns it).
//! [`KeyState`] is also what the key-status route sends (serialised as JSON), and, with the
//! `utoipa` feature, describes itself in an OpenAPI document (as `KeyStatus`).

use once_core::IdempotencyKey;
use serde::Serialize;
use sqlx::PgPool;

/// What the table holds for one of the scope's keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema), schema(as = KeyStatus))]
#[non_exhaustive]
pub struct KeyState {
    /// The key, as the client sent it (unquoted).
    pub key: String,
    /// `processing` (running, or abandoned until its lease ends), `completed` (its answer
    /// is stored: repeat the request to get it) or `failed` (retry it with the same key).
    #[cfg_attr(feature = "utoipa", schema(example = "completed"))]
    pub state: String,
    /// The stored answer's status, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<i16>,
    /// The stored answer's Location, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// The state of `key` in `scope`, or `None` if this scope never used it (or it was purged).
pub async fn key_state(
    db: &PgPool,
    scope: &str,
    key: &IdempotencyKey,
) -> Result<Option<KeyState>, sqlx::Error> {
    let row: Option<(String, Option<i16>, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT state, response_status, response_headers FROM idempotency_keys WHERE scope = $1 AND key = $2",
    )
    .bind(scope)
    .bind(key.as_str())
    .fetch_optional(db)
    .await?;
    Ok(
        row.map(|(state, response_status, response_headers)| KeyState {
            key: key.to_string(),
            state,
            response_status,
            location: response_headers.and_then(|h| h["location"].as_str().map(str::to_owned)),
        }),
    )
}
