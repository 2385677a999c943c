//! Orders: `POST /api/orders` (through the idempotency executor), `GET /api/orders` and
//! `GET /api/orders/{id}`. Orders belong to the shopper's session; others see a 404.

mod new_order;
pub mod store;

use axum::{
    extract::{Path, State},
    response::Response,
    routing::get,
    Json, Router,
};
use sqlx::PgPool;
use uuid::Uuid;

use app::dto::Order;
pub use new_order::NewOrder;

use crate::{
    error::ApiError,
    extract::ApiJson,
    idempotency::{self, executor::Idempotency, RequestKey},
    session::{NamedShopper, Shopper},
    state::AppState,
};

/// The identity of "create an order" in the idempotency table, whichever door it came
/// through (`POST /api/orders` or the no-wasm checkout form).
pub const CREATE_ORDER: &str = "POST /api/orders";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/orders", get(list).post(create))
        .route("/orders/{id}", get(show))
}

async fn create(
    State(idem): State<Idempotency>,
    shopper: NamedShopper,
    key: RequestKey,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let new_order = NewOrder::parse(&body)?;
    let request = key.for_body(&shopper.id, CREATE_ORDER, &body);
    Ok(create_order(&idem, request, new_order, store::Door::Api).await)
}

/// Creates the order under the idempotency protocol; both doors end here.
pub async fn create_order(
    idem: &Idempotency,
    request: idempotency::IdempotentRequest,
    new_order: NewOrder,
    door: store::Door,
) -> Response {
    let session_id = request.scope.clone();
    let key = request.key.to_string();
    idempotency::execute(idem, request, move |db| {
        store::create_in_new_tx(db, session_id, key, new_order, door)
    })
    .await
}

async fn list(State(db): State<PgPool>, shopper: Shopper) -> Result<Json<Vec<Order>>, ApiError> {
    Ok(Json(store::for_session(&db, &shopper.id).await?))
}

async fn show(
    State(db): State<PgPool>,
    shopper: Shopper,
    Path(id): Path<String>,
) -> Result<Json<Order>, ApiError> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound)?;
    store::find(&db, &shopper.id, id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}
