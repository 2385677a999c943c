//! Checking the cart out: the order is built from the cart as the server holds it, under the
//! cart's checkout key (see `cart`), through the same executor, operation and body as
//! `POST /api/orders`. Two doors lead here:
//!
//! * `POST /api/checkout` (the hydrated page): JSON answers, like `POST /api/orders`;
//! * `POST /checkout` (the form, which works without wasm): the key in a hidden field, and
//!   always a redirect, never an error page.
//!
//! Both doors carry the shopper's details (email, shipping address), and the order is the
//! cart as the server holds it with the details as the page sent them: the key fingerprints
//! both, so the same key with other details is `idempotency-key-reused`, never a second order
//! nor an order with details the shopper did not send (docs/protocol.md, "The shopper's
//! details").
//!
//! Only the cart's current key can place an order. A key the cart has moved past (another
//! tab changed the cart, or ordered it) answers with what that key holds — its order, its
//! refusal — or with `cart-changed`, and never orders a cart its page did not show. So two
//! tabs of one cart, or a stale tab, can never make a second order.
//!
//! The form's redirects:
//! * the order exists (first execution or replay) → 303 to the order page;
//! * the first submit of this key is still running (a double click before hydration) →
//!   wait for it briefly, then 303 to the same order;
//! * a transient failure, or a wait that ran out → 303 back to the checkout, which shows
//!   the *same* key, so the next click resumes this intent and cannot be a second order;
//! * refused → 303 back to the checkout with the reason (the refusal ended the intent and
//!   the cart has a new key).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use app::messages;
use axum::{
    extract::{rejection::FormRejection, FromRef, State},
    http::{Method, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::post,
    Form, Router,
};
use domain::details::{Details, DetailsDraft, ShippingAddress};
use once_axum::{IdempotencyKey, IdempotentRequest, KeyedOperation, Refusal};
use once_core::FingerprintKeys;
use serde::Deserialize;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    cart, checkout_details,
    client_addr::ClientBucket,
    config::Config,
    error::ApiError,
    extract::ApiJson,
    faults::FaultRequest,
    idempotency::{asking_for_itself, with_faults, Idempotency, RequestKey},
    openapi::IdempotencyKeyHeader,
    orders::{self, NewOrder},
    session::ExistingShopper,
    state::AppState,
};

/// How long a repeated submit waits for the first one before giving up politely.
const WAIT_FOR_FIRST: Duration = Duration::from_secs(15);
const POLL_EVERY: Duration = Duration::from_millis(200);

/// The form's route (`/checkout`).
pub fn router() -> Router<AppState> {
    Router::new().route("/checkout", post(place_order_form))
}

/// The hydrated page's route, nested under `/api` (`/api/checkout`).
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(place_order_api))
}

/// What placing an order from the cart needs from the state.
#[derive(Clone)]
pub struct Checkout {
    idem: Idempotency,
    fingerprints: FingerprintKeys,
    config: Arc<Config>,
}

impl FromRef<AppState> for Checkout {
    fn from_ref(state: &AppState) -> Self {
        Self {
            idem: Idempotency::from_ref(state),
            fingerprints: state.fingerprints.clone(),
            config: state.config.clone(),
        }
    }
}

/// Who places the order: the session, and the client it came from (for the quotas on
/// orders waiting for payment).
pub struct Placer<'a> {
    pub session_id: &'a str,
    pub client: Option<String>,
}

/// Who asks for a checkout: a client's request (with the wait it asked for, `Prefer:
/// wait`), or the form asking again while it waits for the first submit (asks a client did
/// not send, and not repeats for the journal).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    Client { wait: Option<Duration> },
    FormWaiting,
}

/// Places the order for the session's cart and `details` under `key`, which must be the
/// cart's current checkout key; any other key answers from what it holds.
pub async fn checkout_cart(
    checkout: &Checkout,
    faults: FaultRequest,
    placer: &Placer<'_>,
    key: IdempotencyKey,
    details: &DetailsDraft,
    asking: Asking,
) -> Result<Response, ApiError> {
    let details = Details::parse(details).map_err(ApiError::InvalidDetails)?;
    let session_id = placer.session_id;
    let mut idem = with_faults(&checkout.idem, faults);
    if asking == Asking::FormWaiting {
        idem = asking_for_itself(&idem);
    }
    let db = &idem.db;
    let current = cart::current_key(db, session_id).await?;
    if current.as_deref() != Some(key.as_str()) {
        return answer_for(&idem, session_id, &key, &details).await;
    }
    let cart = cart::read(db, session_id).await?;
    if cart.lines.is_empty() {
        return answer_for(&idem, session_id, &key, &details).await;
    }
    let body = domain::order_request(&cart, &details);
    let new_order = NewOrder::parse(&body)?;
    let request = IdempotentRequest::new(
        &checkout.fingerprints,
        Method::POST,
        session_id,
        key,
        orders::CREATE_ORDER,
        &body,
    );
    let request = match asking {
        Asking::Client { wait } => request.with_wait(wait),
        Asking::FormWaiting => request,
    };
    let door = orders::store::Door::Checkout;
    let quota = orders::pending_quota(&checkout.config, placer.client.clone());
    Ok(orders::create_order(&idem, request, new_order, door, quota).await)
}

/// The answer for a key that is not (or no longer) the cart's: what it holds, if anything,
/// answered and noted as a repeat by the executor; a key that holds nothing is a cart that
/// changed. An order it holds is answered only to the details it was placed with: the cart
/// it was made of is gone, so the details are what is left of the request to compare. They
/// are compared before the executor answers, so that a refusal is noted as one (a reused
/// key), never as a replay.
async fn answer_for(
    idem: &Idempotency,
    session_id: &str,
    key: &IdempotencyKey,
    details: &Details,
) -> Result<Response, ApiError> {
    if let Some(order_id) = held_order(&idem.db, session_id, key).await? {
        if !orders::store::placed_with(&idem.db, order_id, details).await? {
            let at = KeyedOperation::new(session_id, key, orders::CREATE_ORDER);
            idem.hooks.reused_on(at, order_id);
            return Err(ApiError::IdempotencyKeyReused);
        }
    }
    let held = idem
        .held_answer(session_id, key, orders::CREATE_ORDER)
        .await?;
    Ok(held.unwrap_or_else(|| ApiError::CartChanged.into_response()))
}

/// The order `key` made, when its request completed with one (its `Location`).
async fn held_order(
    db: &sqlx::PgPool,
    session_id: &str,
    key: &IdempotencyKey,
) -> Result<Option<uuid::Uuid>, ApiError> {
    let state = match once_axum::status::key_status(db, session_id, key.as_str()).await {
        Ok(state) => state,
        Err(Refusal::KeyUnknown) => return Ok(None),
        Err(refusal) => return Err(refusal.into()),
    };
    let order = state
        .location
        .filter(|_| state.state == "completed")
        .and_then(|at| at.strip_prefix("/api/orders/")?.parse().ok());
    Ok(order)
}

/// Order the session's cart, exactly once per cart (for the shop's own pages)
///
/// The key must be the cart's checkout key, which the shop's pages receive with the cart
/// (the cart is kept through the pages, not this API); any other key answers 422
/// `cart-changed`. API clients place orders with `POST /api/orders`. The order is made
/// from the cart as the server holds it, with the same answers as `POST /api/orders`; a
/// key the cart has moved past answers with what it holds (its order, its refusal), so a
/// stale tab never orders a cart it did not show.
#[utoipa::path(
    post,
    path = "/checkout",
    operation_id = "check_out_cart",
    tag = "orders",
    params(IdempotencyKeyHeader),
    request_body(
        content = DetailsDraft,
        description = "The shopper's details; the order's lines are the cart's.",
        example = json!({"email": "ada@example.com", "shipping_address": {"name": "Ada Lovelace",
            "line1": "1 Main Street", "postal_code": "SW1Y 4JH", "city": "London", "country": "GB"}})
    ),
    responses((status = 201, description = "The order made from the cart (or replayed).", body = domain::Order,
        headers(
            ("Location" = String, description = "The order's address, `/api/orders/{id}`."),
        ))),
    security(("session" = [])),
    extensions(("x-problems" = json!([
        "unsupported-media-type", "malformed-json", "invalid-body", "invalid-details",
        "cart-changed", "invalid-order", "unknown-sku", "out-of-stock",
        "mixed-currencies", "pending-order-quota", "client-pending-order-quota",
        "client-hourly-order-quota",
        "rate-limited"
    ]))),
)]
async fn place_order_api(
    State(checkout): State<Checkout>,
    shopper: ExistingShopper,
    ClientBucket(client): ClientBucket,
    key: RequestKey,
    faults: FaultRequest,
    ApiJson(details): ApiJson<DetailsDraft>,
) -> Result<Response, ApiError> {
    let placer = Placer {
        session_id: &shopper.id,
        client,
    };
    let asking = Asking::Client { wait: key.wait };
    checkout_cart(&checkout, faults, &placer, key.key, &details, asking).await
}

/// The no-wasm checkout form: the key, and the shopper's details field by field.
#[derive(Deserialize)]
struct CheckoutForm {
    idempotency_key: String,
    email: String,
    name: String,
    line1: String,
    #[serde(default)]
    line2: String,
    postal_code: String,
    city: String,
    country: String,
}

impl CheckoutForm {
    fn details(&self) -> DetailsDraft {
        DetailsDraft {
            email: self.email.clone(),
            shipping_address: ShippingAddress {
                name: self.name.clone(),
                line1: self.line1.clone(),
                line2: self.line2.clone(),
                postal_code: self.postal_code.clone(),
                city: self.city.clone(),
                country: self.country.clone(),
            },
        }
    }
}

async fn place_order_form(
    State(checkout): State<Checkout>,
    shopper: Result<ExistingShopper, ApiError>,
    ClientBucket(client): ClientBucket,
    faults: FaultRequest,
    form: Result<Form<CheckoutForm>, FormRejection>,
) -> Response {
    let Ok(shopper) = shopper else {
        return back_to_checkout(messages::SESSION_ENDED);
    };
    // A form the shop did not render (a field missing, another content type): the page
    // says so, as for a key that does not parse.
    let Ok(Form(form)) = form else {
        return back_to_checkout(messages::FORM_INCOMPLETE);
    };
    let Ok(key) = IdempotencyKey::parse(&form.idempotency_key) else {
        return back_to_checkout(messages::FORM_INCOMPLETE);
    };
    let details = form.details();
    let answer = match Details::parse(&details) {
        Ok(_) => place_from_form(&checkout, faults, &shopper.id, client, key, &details).await,
        Err(_) => back_to_checkout(messages::INVALID_DETAILS),
    };
    // Sent back to the checkout: the details are kept with the cart as typed, so that the
    // page shows them again (each field's problem, when they need fixing). Kept only then:
    // while an order of this cart is being written its row is locked, and a double click's
    // second submit must not wait on it; an order placed drops the cart anyway.
    if is_back_to_checkout(&answer) {
        if let Err(e) = checkout_details::save(&checkout.idem.db, &shopper.id, &details).await {
            tracing::warn!(error = %e, "keeping the checkout's details failed");
        }
    }
    answer
}

/// The form's submit with checked details: an order, a refusal, or a wait for the first
/// submit of the same key, as a redirect.
async fn place_from_form(
    checkout: &Checkout,
    faults: FaultRequest,
    session_id: &str,
    client: Option<String>,
    key: IdempotencyKey,
    details: &DetailsDraft,
) -> Response {
    let placer = Placer { session_id, client };
    let started = Instant::now();
    let mut asking = Asking::Client { wait: None };
    loop {
        let answer = checkout_cart(
            checkout,
            faults.clone(),
            &placer,
            key.clone(),
            details,
            asking,
        )
        .await;
        asking = Asking::FormWaiting;
        match redirect_for(answer).await {
            Some(redirect) => return redirect,
            None if started.elapsed() < WAIT_FOR_FIRST => tokio::time::sleep(POLL_EVERY).await,
            None => return back_to_checkout(messages::STILL_PROCESSING),
        }
    }
}

fn is_back_to_checkout(redirect: &Response) -> bool {
    redirect
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|to| to.starts_with("/checkout"))
}

/// The form's redirect for an answer; `None` while the first submit is still running.
async fn redirect_for(answer: Result<Response, ApiError>) -> Option<Response> {
    let response = answer.unwrap_or_else(IntoResponse::into_response);
    Some(match response.status() {
        StatusCode::CREATED => to_order_page(&response),
        StatusCode::CONFLICT => return None,
        status if status.is_client_error() => {
            let name = problem_name(response).await.unwrap_or_default();
            back_to_checkout(messages::for_order_problem(&name))
        }
        _ => back_to_checkout(messages::NOT_PLACED),
    })
}

/// The problem type of a refusal (`out-of-stock`, …): the page shows its words.
async fn problem_name(response: Response) -> Option<String> {
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .ok()?;
    let problem: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(problem["type"].as_str()?.rsplit('/').next()?.to_owned())
}

fn to_order_page(response: &Response) -> Response {
    match response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
    {
        Some(location) => redirect_to_order(location),
        None => Redirect::to("/orders").into_response(),
    }
}

/// `/api/orders/{id}` → the page `/orders/{id}`.
fn redirect_to_order(api_location: &str) -> Response {
    let page = api_location.strip_prefix("/api").unwrap_or(api_location);
    Redirect::to(page).into_response()
}

/// Back to the checkout with the code of the reason (`app::messages`), never its text.
fn back_to_checkout(code: &str) -> Response {
    Redirect::to(&format!("/checkout?problem={}", app::query::encode(code))).into_response()
}
