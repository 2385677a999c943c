//! What a key holds, for a client polling after a 409: its state and, once completed, the
//! stored answer's status and location (never its body: repeating the request returns it).

use once_core::IdempotencyKey;
use sqlx::PgPool;

/// A key's state as a client may see it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyState {
    /// `processing`, `completed` or `failed`.
    pub state: String,
    /// The stored answer's status, once completed.
    pub response_status: Option<i16>,
    /// The stored answer's `location` header, if it had one.
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
            state,
            response_status,
            location: response_headers.and_then(|h| h["location"].as_str().map(str::to_owned)),
        }),
    )
}
