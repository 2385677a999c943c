//! `GET /idempotency-keys/{key}`: the state of the caller's own request, for polling after
//! a 409. Keys of other scopes are invisible (404).

use axum::{
    extract::{FromRef, Path, State},
    routing::get,
    Json, Router,
};
use once_core::IdempotencyKey;
use sqlx::PgPool;

pub use crate::extract::{Scope, Scoped};
use crate::{refusal::Refusal, Problem};

/// What the route answers: the key's state, as the table holds it.
pub use once_pg::KeyState;

/// The key's state in `scope`; `Refusal::KeyUnknown` if this scope never used it.
pub async fn key_status(db: &PgPool, scope: &str, raw: &str) -> Result<KeyState, Refusal> {
    let key = IdempotencyKey::parse(raw).map_err(Refusal::KeyMalformed)?;
    once_pg::key_state(db, scope, &key)
        .await
        .map_err(Refusal::Store)?
        .ok_or(Refusal::KeyUnknown)
}

/// The route, `GET /idempotency-keys/{key}`, for the scope the state declares
/// ([`Scoped`]): the same as its handlers' [`crate::Keyed`], so a client polls the keys it
/// sent and no others. Refusals are [`Problem`]s.
pub fn router<S>() -> Router<S>
where
    S: Scoped,
    PgPool: FromRef<S>,
{
    let show = |State(db): State<PgPool>, scope: S::Scope, Path(raw): Path<String>| async move {
        key_status(&db, scope.scope(), &raw)
            .await
            .map(Json)
            .map_err(Problem::from)
    };
    Router::new().route("/idempotency-keys/{key}", get(show))
}
