//! `GET /idempotency-keys/{key}`: the state of the caller's own request, for polling after
//! a 409. Keys of other scopes are invisible (404).

use axum::{
    extract::{FromRef, FromRequestParts, Path, State},
    routing::get,
    Json, Router,
};
use once_core::IdempotencyKey;
use serde::Serialize;
use sqlx::PgPool;

use crate::hooks::{ProtocolError, Refusal};

/// What an extractor of the application's scope yields: the scope keys are stored under.
pub trait Scope {
    fn scope(&self) -> &str;
}

/// What the table holds for one of the scope's keys.
#[derive(Clone, Debug, Serialize)]
pub struct KeyStatus {
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

/// The route, for an application whose scope extractor is `Sc` and error type `E`.
pub fn router<S, Sc, E>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    PgPool: FromRef<S>,
    Sc: FromRequestParts<S> + Scope + Send + 'static,
    E: ProtocolError,
{
    let show = |State(db): State<PgPool>, scope: Sc, Path(raw): Path<String>| async move {
        key_status(&db, scope.scope(), &raw)
            .await
            .map(Json)
            .map_err(E::from)
    };
    Router::new().route("/idempotency-keys/{key}", get(show))
}
