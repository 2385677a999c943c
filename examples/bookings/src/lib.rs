//! Bookings: `POST /bookings` books a room for a night, `POST /bookings/{id}/cancel` cancels
//! a booking; each takes effect once per `Idempotency-Key`, in the scope of the caller's
//! `X-Api-Key`. A taken room and a second cancel are answers, stored and replayed (409).
use axum::{extract::FromRef, extract::State, http::StatusCode, response::Response, routing::post, Router};
use once_axum::{Executor, FingerprintKeys, HeaderScope, JsonBody, Keyed, PathParams, Problem, Reply};
use once_axum::{ScopeHeader, Scoped};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

/// The scope: the caller's `X-Api-Key`. It tells callers apart; it proves nothing: put the
/// service behind what authenticates its callers, or check the key.
pub struct XApiKey;
impl ScopeHeader for XApiKey {
    const NAME: &'static str = "x-api-key";
}
type ApiKey = HeaderScope<XApiKey>;

#[derive(Clone, FromRef)]
pub struct App {
    pub executor: Executor,
    pub fingerprints: FingerprintKeys,
    pub db: sqlx::PgPool,
}
impl Scoped for App {
    type Scope = ApiKey;
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/bookings", post(book))
        .route("/bookings/{id}/cancel", post(cancel))
        .merge(once_axum::status::router::<App>())
        .with_state(app)
}

#[derive(Deserialize, Serialize)]
pub struct Booking {
    room: i32,
    night: chrono::NaiveDate,
    guest: String,
}

async fn book(
    State(app): State<App>,
    keyed: Keyed<ApiKey>,
    JsonBody(b): JsonBody<Booking>,
) -> Result<Response, Problem> {
    let req = keyed.request("POST /bookings", &b)?;
    let owner = req.scope.clone();
    Ok(app.executor.execute(req, move |db| async move {
        let mut tx = db.begin().await?;
        let id: Option<Uuid> = sqlx::query_scalar("INSERT INTO bookings (owner, room, night, guest) VALUES ($1, $2, $3, $4) ON CONFLICT (owner, room, night) WHERE cancelled_at IS NULL DO NOTHING RETURNING id")
            .bind(&owner).bind(b.room).bind(b.night).bind(&b.guest).fetch_optional(&mut *tx).await?;
        let id = id.ok_or(Problem::new(StatusCode::CONFLICT, "room-taken", "That room is booked that night."))?;
        Ok((tx, Reply::json(StatusCode::CREATED, &json!({ "id": id, "booking": b }))?))
    }).await)
}

#[derive(Deserialize, Serialize)]
pub struct Cancel {
    reason: String,
}

async fn cancel(
    State(app): State<App>,
    keyed: Keyed<ApiKey>,
    PathParams(id): PathParams<Uuid>,
    JsonBody(c): JsonBody<Cancel>,
) -> Result<Response, Problem> {
    let req = keyed.request_on("POST /bookings/{id}/cancel", &[("id", &id.to_string())], &c)?;
    let owner = req.scope.clone();
    Ok(app.executor.execute(req, move |db| async move {
        let mut tx = db.begin().await?;
        let (found, done): (i64, i64) = sqlx::query_as("WITH b AS (SELECT id, cancelled_at FROM bookings WHERE id = $1 AND owner = $2 FOR UPDATE), u AS (UPDATE bookings SET cancelled_at = now(), reason = $3 FROM b WHERE bookings.id = b.id AND b.cancelled_at IS NULL RETURNING 1) SELECT (SELECT count(*) FROM b), (SELECT count(*) FROM u)")
            .bind(id).bind(&owner).bind(&c.reason).fetch_one(&mut *tx).await?;
        if found == 0 { return Err(Problem::new(StatusCode::NOT_FOUND, "no-such-booking", "You have no such booking.")); }
        if done == 0 { return Err(Problem::new(StatusCode::CONFLICT, "cancelled-already", "That booking is cancelled.")); }
        Ok((tx, Reply::json(StatusCode::OK, &json!({ "id": id, "cancelled": c.reason }))?))
    }).await)
}
