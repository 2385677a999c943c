//! The shopper's identity: an anonymous session in a cookie (HttpOnly, SameSite=Lax) whose
//! data lives in PostgreSQL, so it survives a server restart and is shared by every instance.

use std::sync::Arc;

use axum::{
    extract::{FromRequestParts, Request, State},
    http::{header, request::Parts, Method},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sqlx::PgPool;
use tower_sessions::{
    cookie::{time::Duration, SameSite},
    Expiry, Session, SessionManagerLayer,
};
use tower_sessions_sqlx_store::PostgresStore;

use crate::{
    error::ApiError,
    throttle::{self, Throttle},
};

pub const COOKIE_NAME: &str = "once_session";
/// How long a shop session lives without a change.
const LIFETIME_DAYS: i64 = 30;
const OPERATOR_COOKIE_NAME: &str = "once_operator";
const OPENED_AT: &str = "opened_at";

/// Creates the session table if needed and returns the layer that loads and saves sessions.
/// `secure`: the shop is served over HTTPS (`SERVED_OVER_HTTPS`), so the cookie is sent over
/// HTTPS only.
pub async fn layer(
    pool: PgPool,
    secure: bool,
) -> anyhow::Result<SessionManagerLayer<PostgresStore>> {
    let store = PostgresStore::new(pool);
    store.migrate().await?;
    Ok(SessionManagerLayer::new(store)
        .with_name(COOKIE_NAME)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(Duration::days(LIFETIME_DAYS))))
}

/// The table of the operator console's sessions: apart from the shoppers', so that an
/// operator's session id sent as a shop cookie names no shop session (it could otherwise
/// place orders), and a shop session id sent as an operator cookie names nothing either.
const OPERATOR_SESSION_TABLE: &str = "operator_session";

/// The operator console's own session: another cookie, sent only to `/operator`, never
/// along with a shop request (`SameSite=Strict`), stored in a table of its own, and ended
/// after 8 hours of inactivity. A shopper's session can never be an operator's, and logging
/// in leaves a browser's shop session (its cart, its orders) alone.
pub async fn operator_layer(
    pool: PgPool,
    secure: bool,
) -> anyhow::Result<SessionManagerLayer<PostgresStore>> {
    let store = PostgresStore::new(pool)
        .with_table_name(OPERATOR_SESSION_TABLE)
        .map_err(anyhow::Error::msg)?;
    store.migrate().await?;
    Ok(SessionManagerLayer::new(store)
        .with_name(OPERATOR_COOKIE_NAME)
        .with_path("/operator")
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(Duration::hours(8))))
}

/// Middleware: a read (GET or HEAD) without a session opens one, so the response sets the
/// cookie and the client keeps one identity from its first page or `GET /api/session` on.
/// Writes never open a session here: see [`ExistingShopper`]. A client that opened as many
/// sessions as it may this hour (`NEW_SESSIONS_PER_CLIENT_PER_HOUR`) is told when to come
/// back instead: each session is a row, and a client without a cookie would otherwise store
/// one per read. A read another site's page embedded opens none and is refused (403
/// `cross-site-request`, `origin::embedded_by_another_site`), so it cannot spend that
/// allowance for the visitor's address.
pub async fn open_session(
    State(throttle): State<Arc<Throttle>>,
    session: Session,
    request: Request,
    next: Next,
) -> Response {
    if opens_a_session(request.method()) {
        match existing_id(&session).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                if crate::origin::embedded_by_another_site(request.headers()) {
                    return ApiError::CrossSite.into_response();
                }
                if let Some(retry_after) = throttle.new_session_wait(&request) {
                    return throttle::too_many(retry_after);
                }
                if let Err(e) = ensure_open(&session).await {
                    return e.into_response();
                }
            }
            Err(e) => return e.into_response(),
        }
    }
    next.run(request).await
}

fn unavailable(e: tower_sessions::session::Error) -> ApiError {
    crate::db::note_possible_loss();
    ApiError::Unavailable(anyhow::anyhow!("session store: {e}"))
}

/// Middleware, outside a session layer: when the session store cannot save a session after
/// the handler ran (its database connection dropped, as in a failover), the session layer
/// answers a bare 500 of its own and logs the cause. That is an outage, not a fault of the
/// request: the answer becomes the shop's 503 with `Retry-After`, and a keyed write retried
/// with its key is replayed. The handler's own errors are never bare: they carry a problem
/// body (`crate::error`).
pub async fn store_away(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let bare = response.headers().get(header::CONTENT_TYPE).is_none();
    if response.status() != axum::http::StatusCode::INTERNAL_SERVER_ERROR || !bare {
        return response;
    }
    crate::db::note_possible_loss();
    ApiError::Unavailable(anyhow::anyhow!(
        "the session store could not save the session"
    ))
    .into_response()
}

/// Only a page or resource read opens a session: GET and HEAD, not OPTIONS or TRACE (a
/// preflight or a refused method needs none), and never a write.
fn opens_a_session(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// Middleware, outside the session layer: a write (any method but GET and HEAD) never sets
/// the shop's session cookie.
/// Nothing a write does opens a session (see [`ExistingShopper`] and the server functions
/// in `ssr`); this makes sure of it, because a `Set-Cookie` in the answer to a form that
/// another site posted would replace the shopper's session with an empty one.
pub async fn no_cookie_from_writes(request: Request, next: Next) -> Response {
    let write = !opens_a_session(request.method());
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !write || !headers.get_all(header::SET_COOKIE).iter().any(sets_ours) {
        return response;
    }
    tracing::warn!("a write tried to set the session cookie; it was dropped");
    let kept: Vec<_> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter(|c| !sets_ours(c))
        .cloned()
        .collect();
    headers.remove(header::SET_COOKIE);
    for cookie in kept {
        headers.append(header::SET_COOKIE, cookie);
    }
    response
}

/// Whether a `Set-Cookie` sets the shop's session cookie.
fn sets_ours(cookie: &header::HeaderValue) -> bool {
    cookie
        .as_bytes()
        .strip_prefix(COOKIE_NAME.as_bytes())
        .is_some_and(|rest| rest.starts_with(b"="))
}

/// The id of the session the request's cookie names, if the store knows it. Loading the
/// record is what tells: a cookie value the store does not know (expired, purged, made up)
/// leaves the session without an id.
pub async fn existing_id(session: &Session) -> Result<Option<String>, ApiError> {
    session.get::<i64>(OPENED_AT).await.map_err(unavailable)?;
    Ok(session.id().map(|id| id.to_string()))
}

/// The session's id, opening (and storing) a session first when there is none.
pub async fn ensure_open(session: &Session) -> Result<String, ApiError> {
    if let Some(id) = existing_id(session).await? {
        return Ok(id);
    }
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

fn session_of(parts: &mut Parts) -> Result<Session, ApiError> {
    parts
        .extensions
        .get::<Session>()
        .cloned()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the session layer is missing")))
}

/// The current shopper, for reads. `id` scopes idempotency keys and owns orders: a key or
/// an order of another session is invisible. A read without a session gets one.
pub struct Shopper {
    pub id: String,
    pub session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for Shopper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let session = session_of(parts)?;
        // Only a read opens a session: never a POST (see `no_cookie_from_writes`).
        let id = if opens_a_session(&parts.method) {
            ensure_open(&session).await?
        } else {
            existing_id(&session)
                .await?
                .ok_or(ApiError::SessionRequired)?
        };
        Ok(Self { id, session })
    }
}

/// The current shopper, for writes: the session must exist in the store *before* the
/// request. A session opened by the write itself would travel back only in that response's
/// Set-Cookie; if the response is lost, the client's retry (same key, still no cookie)
/// would arrive as a stranger and execute again. So a write without one is refused with
/// 400 `session-required`, before anything is stored (docs/design.md, "Identity").
pub struct ExistingShopper {
    pub id: String,
    pub session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for ExistingShopper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let session = session_of(parts)?;
        match existing_id(&session).await? {
            Some(id) => Ok(Self { id, session }),
            None => Err(ApiError::SessionRequired),
        }
    }
}

/// The shopper of an idempotent write, as the cookie names it, without loading the session:
/// the executor checks that the store knows it in the same statement that reads the key
/// (`idempotency::first_read`), so a repeat costs one read. A request without a
/// session cookie is refused here, and one whose session the store does not know is refused
/// there, both with 400 `session-required` and nothing stored.
pub struct NamedShopper {
    pub id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for NamedShopper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match session_of(parts)?.id() {
            Some(id) => Ok(Self { id: id.to_string() }),
            None => Err(ApiError::SessionRequired),
        }
    }
}

/// Open a session (`GET /api/session`)
///
/// For API clients that want their cookie before their first write: a write without one
/// is refused (`session-required`). The middleware opened it already; this says so.
#[utoipa::path(
    get,
    path = "/session",
    operation_id = "open_session",
    tag = "session",
    responses((status = 200, description = "The session is open.",
        headers(("Set-Cookie" = String, description = "`once_session=…`, when the request came without a live session.")),
        body = serde_json::Value, example = json!({"session": "open"}))),
)]
pub async fn show(shopper: Shopper) -> axum::Json<serde_json::Value> {
    let _ = shopper;
    axum::Json(serde_json::json!({ "session": "open" }))
}

/// Holds the session's row in the store until the caller's transaction ends, so that the
/// writes of one session that count against a quota (orders waiting for payment, cart adds)
/// count one at a time: two tabs cannot both see the last free place. It is taken first in
/// any transaction that takes it, so no two such transactions wait for each other's rows.
/// Other sessions are not held up.
pub async fn hold_for_quota(
    tx: &mut sqlx::PgConnection,
    session_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT 1 AS held FROM tower_sessions.session WHERE id = $1 FOR NO KEY UPDATE",
        session_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(())
}

/// Forgets sessions that were opened by a read and never used: unchanged for `idle`, with no
/// cart, cart add, order or idempotency key. A reader without a cookie costs a row only
/// until then (docs/design.md, "Hostile traffic"); its browser's next page opens a new
/// session, and nothing is lost, since nothing hung on the old one. Returns how many went.
pub async fn forget_unused(db: &PgPool, idle: std::time::Duration) -> Result<u64, sqlx::Error> {
    let forgotten = sqlx::query(&FORGET_UNUSED)
        .bind(LIFETIME_DAYS)
        .bind(idle.as_millis() as i64)
        .execute(db)
        .await?;
    Ok(forgotten.rows_affected())
}

/// One statement, so that a key or an order made meanwhile is seen by the statement that
/// deletes. A session held by a transaction (an order counting against the quota,
/// `hold_for_quota`) is skipped, not waited for: it is in use. Whether a session holds keys
/// is asked of the key table's crate (its own SQL), so the statement is built at start and
/// checked by the tests rather than at compile time.
static FORGET_UNUSED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "DELETE FROM tower_sessions.session s
          WHERE s.id IN (
                SELECT u.id FROM tower_sessions.session u
                 WHERE u.expiry_date < now() + $1::bigint * interval '1 day' - $2::bigint * interval '1 millisecond'
                   AND NOT EXISTS (SELECT 1 FROM carts c WHERE c.session_id = u.id)
                   AND NOT EXISTS (SELECT 1 FROM cart_adds a WHERE a.session_id = u.id)
                   AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.session_id = u.id)
                   AND NOT {keyed}
                   FOR UPDATE SKIP LOCKED)",
        keyed = once_pg::inspect::scope_holds_keys("u.id")
    )
});

/// Forgets the operator sessions whose time ran out (8 hours without a page) or that a
/// logout left behind: the store only refuses them, it never deletes them. Returns how many.
pub async fn forget_ended_operator_sessions(db: &PgPool) -> Result<u64, sqlx::Error> {
    let forgotten =
        sqlx::query!("DELETE FROM tower_sessions.operator_session WHERE expiry_date < now()")
            .execute(db)
            .await?;
    Ok(forgotten.rows_affected())
}

/// Runs [`forget_unused`] and [`forget_ended_operator_sessions`] every `every` until the task
/// is aborted; safe on several instances at once (each DELETE stands alone).
pub async fn run_forgetting_unused(
    db: PgPool,
    idle: std::time::Duration,
    every: std::time::Duration,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match forget_unused(&db, idle).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                forgotten = n,
                "forgot sessions opened by reads and never used"
            ),
            Err(e) => tracing::warn!(error = %e, "forgetting unused sessions failed; will retry"),
        }
        if let Err(e) = forget_ended_operator_sessions(&db).await {
            tracing::warn!(error = %e, "forgetting ended operator sessions failed; will retry");
        }
    }
}
