//! `GET /idempotency-keys/{key}`: the state of the caller's own request, for polling after
//! a 409. Keys of other scopes are invisible (404). With `Prefer: wait=N` and an executor
//! that waits ([`crate::executor::wait`]), a key still running is answered when it
//! completes or fails, or after N seconds: one long poll instead of many.

use std::time::Duration;

use axum::{
    extract::{FromRef, Path, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use once_core::IdempotencyKey;
use sqlx::PgPool;
use tokio::time::Instant;

pub use crate::extract::{Scope, Scoped};
use crate::{
    executor::wait::{self, Waited, Waits},
    extract::prefer_wait,
    refusal::Refusal,
    Problem,
};

/// What the route answers: the key's state, as the table holds it.
pub use once_pg::KeyState;

/// The key's state in `scope`; `Refusal::KeyUnknown` if this scope never used it.
pub async fn key_status(db: &PgPool, scope: &str, raw: &str) -> Result<KeyState, Refusal> {
    let key = IdempotencyKey::parse(raw).map_err(Refusal::KeyMalformed)?;
    read(db, scope, &key).await
}

/// Like [`key_status`], but a key whose request runs under a valid lease is answered when
/// it stops running (completed, failed, or its lease lapsed), or once `wait` has passed (at
/// most what `waits` allows); and whether the wait was honoured (there was room for it).
/// Served through [`answer`], which says so in `Preference-Applied`.
async fn read_waiting(
    db: &PgPool,
    waits: &Waits,
    scope: &str,
    raw: &str,
    wait: Duration,
) -> Result<(KeyState, bool), Refusal> {
    let key = IdempotencyKey::parse(raw).map_err(Refusal::KeyMalformed)?;
    let state = read(db, scope, &key).await?;
    if state.state != "processing" {
        return Ok((state, true));
    }
    let until = Instant::now() + waits.granted_for(wait);
    let running = |row: Option<once_pg::store::KeyRow>| match row {
        Some(row) if row.state == "processing" && row.lease_valid => None,
        _ => Some(()),
    };
    match waits
        .until_settled(scope, key.as_str(), until, running)
        .await
    {
        Waited::Changed(()) => Ok((read(db, scope, &key).await?, true)),
        Waited::Running => Ok((state, true)),
        Waited::Refused => Ok((state, false)),
        Waited::Stopping => Err(Refusal::Stopping),
    }
}

async fn read(db: &PgPool, scope: &str, key: &IdempotencyKey) -> Result<KeyState, Refusal> {
    once_pg::key_state(db, scope, key)
        .await
        .map_err(Refusal::Store)?
        .ok_or(Refusal::KeyUnknown)
}

/// The route's answer for `raw` in `scope`: the key's state as JSON, after the wait that
/// `headers` ask for (`Prefer: wait=N`) when `waits` allow one, with `Preference-Applied`
/// when the wait was honoured. For an application that mounts the route itself (for its own
/// error type or API reference); [`router`] mounts it as it is.
pub async fn answer(
    db: &PgPool,
    waits: Option<&Waits>,
    scope: &str,
    raw: &str,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    let (state, granted) = match (waits, prefer_wait(headers)) {
        (Some(waits), Some(asked)) => {
            let (state, honoured) = read_waiting(db, waits, scope, raw, asked).await?;
            (state, honoured.then(|| waits.granted_for(asked)))
        }
        _ => (key_status(db, scope, raw).await?, None),
    };
    Ok(wait::applied(granted, Json(state).into_response()))
}

/// The route, `GET /idempotency-keys/{key}`, for the scope the state declares
/// ([`Scoped`]): the same as its handlers' [`crate::Keyed`], so a client polls the keys it
/// sent and no others. With the state's [`Scoped::waits`], `Prefer: wait` makes it a long
/// poll. Refusals are [`Problem`]s.
pub fn router<S>() -> Router<S>
where
    S: Scoped,
    PgPool: FromRef<S>,
{
    let show = |State(state): State<S>,
                scope: S::Scope,
                headers: HeaderMap,
                Path(raw): Path<String>| async move {
        let db = PgPool::from_ref(&state);
        let waits = state.waits();
        answer(&db, waits.as_ref(), scope.scope(), &raw, &headers)
            .await
            .unwrap_or_else(|refusal| Problem::from(refusal).into_response())
    };
    Router::new().route("/idempotency-keys/{key}", get(show))
}
