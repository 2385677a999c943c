//! Bookings: `POST /bookings` books a room for a night, `POST /bookings/{id}/cancel` cancels
//! a booking; each takes effect once per `Idempotency-Key`, in the scope of the caller's
//! `X-Api-Key`. A taken room and a second cancel are answers, stored and replayed (409).
use axum::extract::{FromRef, FromRequestParts, Path, State};
use axum::{http::request::Parts, http::StatusCode, response::Response, routing::post, Json, Router};
use once_axum::{Executor, FingerprintKeys, Keyed, Problem, Reply, Scope, Scoped};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

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
    night: String,
    guest: String,
}

async fn book(State(app): State<App>, keyed: Keyed<ApiKey>, Json(b): Json<Booking>) -> Result<Response, Problem> {
    let req = keyed.request("POST /bookings", &b)?;
    let owner = req.scope.clone();
    Ok(app.executor.execute(req, move |db| async move {
        let mut tx = db.begin().await?;
        let id: Option<Uuid> = sqlx::query_scalar("INSERT INTO bookings (owner, room, night, guest) VALUES ($1, $2, $3::date, $4) ON CONFLICT ON CONSTRAINT bookings_room_night_key DO NOTHING RETURNING id")
            .bind(&owner).bind(b.room).bind(&b.night).bind(&b.guest).fetch_optional(&mut *tx).await?;
        let id = id.ok_or(Problem::new(StatusCode::CONFLICT, "room-taken", "That room is booked that night."))?;
        Ok((tx, Reply::created(format!("/bookings/{id}"), &json!({ "id": id, "booking": b }))?))
    }).await)
}

#[derive(Deserialize, Serialize)]
pub struct Cancel {
    reason: String,
}

async fn cancel(
    State(app): State<App>,
    keyed: Keyed<ApiKey>,
    Path(id): Path<Uuid>,
    Json(c): Json<Cancel>,
) -> Result<Response, Problem> {
    let req = keyed.request_on("POST /bookings/{id}/cancel", &[("id", &id.to_string())], &c)?;
    let owner = req.scope.clone();
    Ok(app.executor.execute(req, move |db| async move {
        let mut tx = db.begin().await?;
        let done = sqlx::query("UPDATE bookings SET cancelled_at = now(), reason = $3 WHERE id = $1 AND owner = $2 AND cancelled_at IS NULL")
            .bind(id).bind(&owner).bind(&c.reason).execute(&mut *tx).await?.rows_affected();
        let gone = Problem::new(StatusCode::CONFLICT, "not-cancellable", "No such booking of yours, or it is cancelled.");
        if done == 0 { return Err(gone); }
        Ok((tx, Reply::json(StatusCode::OK, &json!({ "id": id, "cancelled": c.reason }))?))
    }).await)
}

/// The scope: the caller's API key.
pub struct ApiKey(String);
impl Scope for ApiKey {
    fn scope(&self) -> &str {
        &self.0
    }
}
impl<S: Sync> FromRequestParts<S> for ApiKey {
    type Rejection = Problem;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
        key.map(|k| ApiKey(k.to_owned())).ok_or(Problem::new(
            StatusCode::UNAUTHORIZED,
            "api-key-missing",
            "Send your X-Api-Key.",
        ))
    }
}
