//! The shopper's identity: an anonymous session in a cookie (HttpOnly, SameSite=Lax) whose
//! data lives in PostgreSQL, so it survives a server restart and is shared by every instance.

use axum::{
    extract::{FromRequestParts, Request},
    http::request::Parts,
    middleware::Next,
    response::{IntoResponse, Response},
};
use sqlx::PgPool;
use tower_sessions::{
    cookie::{time::Duration, SameSite},
    Expiry, Session, SessionManagerLayer,
};
use tower_sessions_sqlx_store::PostgresStore;

use crate::error::ApiError;

const COOKIE_NAME: &str = "once_session";
const OPENED_AT: &str = "opened_at";

/// Creates the session table if needed and returns the layer that loads and saves sessions.
pub async fn layer(pool: PgPool) -> anyhow::Result<SessionManagerLayer<PostgresStore>> {
    let store = PostgresStore::new(pool);
    store.migrate().await?;
    Ok(SessionManagerLayer::new(store)
        .with_name(COOKIE_NAME)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(false)
        .with_expiry(Expiry::OnInactivity(Duration::days(30))))
}

/// Middleware: a request without a session opens one, so the response sets the cookie and
/// the client keeps one identity from its first request on.
pub async fn open_session(session: Session, request: Request, next: Next) -> Response {
    if let Err(e) = ensure_open(&session).await {
        return e.into_response();
    }
    next.run(request).await
}

async fn ensure_open(session: &Session) -> Result<String, ApiError> {
    if let Some(id) = session.id() {
        return Ok(id.to_string());
    }
    let unavailable = |e: tower_sessions::session::Error| {
        ApiError::Unavailable(anyhow::anyhow!("session store: {e}"))
    };
    session
        .insert(OPENED_AT, chrono::Utc::now().timestamp())
        .await
        .map_err(unavailable)?;
    session.save().await.map_err(unavailable)?;
    session
        .id()
        .map(|id| id.to_string())
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("session has no id after save")))
}

/// The current shopper. `id` scopes idempotency keys and owns orders: a key or an order of
/// another session is invisible.
pub struct Shopper {
    pub id: String,
    pub session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for Shopper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let session = Session::from_request_parts(parts, state)
            .await
            .map_err(|(_, msg)| {
                ApiError::Internal(anyhow::anyhow!("session layer missing: {msg}"))
            })?;
        let id = ensure_open(&session).await?;
        Ok(Self { id, session })
    }
}
