//! `GET /idempotency-keys/{key}`: the state of the caller's own request, for polling after
//! a 409. Keys of other scopes are invisible (404).

use axum::{
    extract::{FromRef, Path, State},
    routing::get,
    Json, Router,
};
use once_core::IdempotencyKey;
use serde::Serialize;
use sqlx::PgPool;

pub use crate::extract::{Scope, Scoped};
use crate::{hooks::Refusal, Problem};

/// What the table holds for one of the scope's keys.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct KeyStatus {
    /// The key, as the client sent it (unquoted).
    pub key: String,
    /// `processing` (running, or abandoned until its lease ends), `completed` (its answer
    /// is stored: repeat the request to get it) or `failed` (retry it with the same key).
    pub state: String,
    /// The stored answer's status, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<i16>,
    /// The stored answer's Location, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// The key's status in `scope`; `Refusal::KeyUnknown` if this scope never used it.
pub async fn key_status(db: &PgPool, scope: &str, raw: &str) -> Result<KeyStatus, Refusal> {
    let key = IdempotencyKey::parse(raw).map_err(Refusal::KeyMalformed)?;
    let state = once_pg::key_state(db, scope, &key)
        .await
        .map_err(Refusal::Store)?
        .ok_or(Refusal::KeyUnknown)?;
    Ok(KeyStatus {
        key: key.to_string(),
        state: state.state,
        response_status: state.response_status,
        location: state.location,
    })
}

/// The route, `GET /idempotency-keys/{key}`, for the scope the state declares
/// ([`Scoped`]): the same as its handlers' [`crate::Keyed`], so a client polls the keys it
/// sent and no others. Refusals are [`Problem`]s.
pub fn router<S>() -> Router<S>
where
    S: Scoped,
    PgPool: FromRef<S>,
{
    let show =
        |State(db): State<PgPool>, scope: S::Scope, Path(raw): Path<String>| async move {
            key_status(&db, scope.scope(), &raw)
                .await
                .map(Json)
                .map_err(Problem::from)
        };
    Router::new().route("/idempotency-keys/{key}", get(show))
}
