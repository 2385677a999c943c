//! Orders: `POST /api/orders` (through the idempotency executor), `GET /api/orders` and
//! `GET /api/orders/{id}`. Orders belong to the shopper's session; others see a 404.

pub mod cancel;
mod new_order;
pub mod personal_data;
pub mod store;

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    response::Response,
    Json,
};
use once_axum::{IdempotentRequest, Reply};
use sqlx::PgPool;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use domain::Order;
pub use new_order::{NewOrder, NewOrderBody};

use crate::{
    client_addr::ClientBucket,
    config::Config,
    error::ApiError,
    extract::ApiJson,
    idempotency::{Idempotency, RequestExecutor, RequestKey},
    openapi::IdempotencyKeyHeader,
    session::{NamedShopper, Shopper},
    state::AppState,
};

/// The identity of "create an order" in the idempotency table, whichever door it came
/// through (`POST /api/orders` or the no-wasm checkout form).
pub const CREATE_ORDER: &str = "POST /api/orders";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show))
        .routes(routes!(cancel::cancel))
}

/// Place an order, exactly once per Idempotency-Key
///
/// Prices, totals and stock come from the shop, never from the body. Retry with the same
/// key and the same body until an answer other than 409 or 5xx arrives: the order is made
/// once, and every repeat gets the same 201 (marked `Idempotent-Replayed: true`).
#[utoipa::path(
    post,
    path = "/orders",
    operation_id = "create_order",
    tag = "orders",
    params(IdempotencyKeyHeader),
    request_body(
        content = NewOrderBody,
        example = json!({"items": [{"sku": "MUG-001", "quantity": 2}, {"sku": "PEN-005", "quantity": 1}],
            "email": "ada@example.com",
            "shipping_address": {"name": "Ada Lovelace", "line1": "1 Main Street",
                "postal_code": "SW1Y 4JH", "city": "London", "country": "GB"}})
    ),
    responses((
        status = 201,
        description = "The order: made by this request, or replayed from the first one that completed with this key.",
        body = Order,
        headers(
            ("Location" = String, description = "The order's address, `/api/orders/{id}`."),
        ),
    )),
    security(("session" = [])),
    extensions(("x-problems" = json!([
        "unsupported-media-type",
        "malformed-json", "invalid-body", "invalid-order", "invalid-details", "unknown-sku", "out-of-stock",
        "mixed-currencies", "payload-too-large", "pending-order-quota", "client-pending-order-quota",
        "client-hourly-order-quota",
        "rate-limited"
    ]))),
)]
async fn create(
    RequestExecutor(idem): RequestExecutor,
    State(config): State<Arc<Config>>,
    shopper: NamedShopper,
    ClientBucket(client): ClientBucket,
    key: RequestKey,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let new_order = NewOrder::parse(&body)?;
    let request = key.for_body(&shopper.id, CREATE_ORDER, &body);
    let quota = pending_quota(&config, client);
    Ok(create_order(&idem, request, new_order, store::Door::Api, quota).await)
}

/// The quotas on orders waiting for payment, for an order of `client`.
pub fn pending_quota(config: &Config, client: Option<String>) -> store::PendingQuota {
    store::PendingQuota {
        per_session: config.limits.pending_orders,
        per_client: config.limits.pending_orders_per_client,
        per_client_hour: config.limits.orders_per_client_per_hour,
        client,
    }
}

/// The `Retry-After` of a refusal for too many unpaid orders: paying takes a minute.
const PENDING_QUOTA_RETRY_AFTER_SECS: u64 = 60;

/// Creates the order under the idempotency protocol; both doors end here. An order is
/// made in one transaction and nowhere else, so its statements run while the claim of its
/// key commits (`execute_in_one_tx`); they take effect only if the claim was ours.
pub async fn create_order(
    idem: &Idempotency,
    request: IdempotentRequest,
    new_order: NewOrder,
    door: store::Door,
    quota: store::PendingQuota,
) -> Response {
    let session_id = request.scope.clone();
    let key = request.key.to_string();
    idem.execute_in_one_tx(request, move |db| {
        let (session_id, key, new_order) = (session_id.clone(), key.clone(), new_order.clone());
        let quota = quota.clone();
        async move {
            let (tx, outcome) =
                store::create_in_new_tx(db, session_id, key, new_order, door, quota).await?;
            Ok((tx, reply(outcome)?))
        }
    })
    .await
}

/// The answer an order attempt stores and sends: 201 with the order and its `Location`, or
/// the refusal as a problem (a 422, stored and replayed like the order would be).
fn reply(outcome: store::Outcome) -> Result<Reply, ApiError> {
    match outcome {
        store::Outcome::Created(order) => {
            Ok(Reply::created(format!("/api/orders/{}", order.id), &order)?)
        }
        store::Outcome::Refused(refusal) => Ok(refused(refusal).reply()),
        // Not stored: the key stays open, and the same request may succeed later.
        store::Outcome::OverQuota => Err(ApiError::TooManyRequests {
            problem: "pending-order-quota",
            detail: "You have as many orders waiting for payment as the shop keeps open at \
                     once. Pay or cancel one of them, then place this order again."
                .to_owned(),
            retry_after_secs: PENDING_QUOTA_RETRY_AFTER_SECS,
        }),
        store::Outcome::OverClientQuota => Err(ApiError::TooManyRequests {
            problem: "client-pending-order-quota",
            detail: "Many orders placed from your network are waiting for payment. The shop \
                     takes more once some of them are paid, cancelled or expired: please try \
                     again later."
                .to_owned(),
            retry_after_secs: PENDING_QUOTA_RETRY_AFTER_SECS,
        }),
        store::Outcome::OverClientHourlyQuota { retry_after_secs } => {
            Err(ApiError::TooManyRequests {
                problem: "client-hourly-order-quota",
                detail: "Many orders were placed from your network in the last hour. The \
                         shop takes more later: please try again then."
                    .to_owned(),
                retry_after_secs,
            })
        }
    }
}

/// What the shopper reads when the shop refuses an order: the product by name, and what
/// to do about it.
fn refused(refusal: store::OrderRefused) -> ApiError {
    match refusal {
        store::OrderRefused::UnknownSku(sku) => {
            ApiError::unprocessable("unknown-sku", format!("there is no product {sku}"))
        }
        store::OrderRefused::OutOfStock { name, stock } if stock <= 0 => ApiError::unprocessable(
            "out-of-stock",
            format!("{name} is sold out. Remove it from your cart to order the rest."),
        ),
        store::OrderRefused::OutOfStock { name, stock } => ApiError::unprocessable(
            "out-of-stock",
            format!("Only {stock} of {name} are in stock. Lower the quantity in your cart, then order again."),
        ),
        store::OrderRefused::MixedCurrencies => ApiError::unprocessable(
            "mixed-currencies",
            "all items of an order must share one currency",
        ),
        store::OrderRefused::CartChanged => ApiError::CartChanged,
    }
}

/// The session's orders, newest first
#[utoipa::path(
    get,
    path = "/orders",
    operation_id = "list_orders",
    tag = "orders",
    responses((status = 200, description = "The orders of this session (none for a new one).", body = Vec<Order>)),
    security((), ("session" = [])),
)]
async fn list(State(db): State<PgPool>, shopper: Shopper) -> Result<Json<Vec<Order>>, ApiError> {
    Ok(Json(store::for_session(&db, &shopper.id).await?))
}

/// One order of the session, with its status history and fulfillment
#[utoipa::path(
    get,
    path = "/orders/{id}",
    operation_id = "get_order",
    tag = "orders",
    params(("id" = Uuid, Path, description = "The order's id, from its Location.")),
    responses((status = 200, description = "The order as it is now.", body = Order)),
    security((), ("session" = [])),
    extensions(("x-problems" = json!(["not-found"]))),
)]
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
