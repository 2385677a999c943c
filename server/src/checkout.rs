//! The checkout form without wasm: `POST /checkout`, form-encoded, the Idempotency-Key in a
//! hidden field. It goes through the same executor as `POST /api/orders`, with the same
//! operation and body, so a native submit and the hydrated page's submit of one intent are
//! one request. The key it carries is the cart's checkout key (see `cart`): it stays the
//! same across failures, reloads and tabs until the intent ends. It always ends in a
//! redirect, never an error page:
//!
//! * the order exists (first execution or replay) → 303 to the order page;
//! * the first submit of this key is still running (a double click before hydration) →
//!   wait for it briefly, then 303 to the same order;
//! * a transient failure, or a wait that ran out → 303 back to the checkout, which shows
//!   the *same* key, so the next click resumes this intent and cannot be a second order;
//! * refused → 303 back to the checkout with the reason (the refusal ended the intent and
//!   the cart has a new key).

use std::time::{Duration, Instant};

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::post,
    Form, Router,
};
use serde::Deserialize;
use sqlx::PgPool;

use crate::{
    cart,
    error::ApiError,
    faults::FaultRequest,
    idempotency::{self, executor::Idempotency, IdempotencyKey, IdempotentRequest},
    orders::{self, NewOrder},
    session::ExistingShopper,
    startup::AppState,
};

/// How long a repeated submit waits for the first one before giving up politely.
const WAIT_FOR_FIRST: Duration = Duration::from_secs(15);
const POLL_EVERY: Duration = Duration::from_millis(200);

pub fn router() -> Router<AppState> {
    Router::new().route("/checkout", post(place_order))
}

#[derive(Deserialize)]
struct CheckoutForm {
    idempotency_key: String,
}

async fn place_order(
    State(idem): State<Idempotency>,
    State(db): State<PgPool>,
    shopper: Result<ExistingShopper, ApiError>,
    headers: HeaderMap,
    Form(form): Form<CheckoutForm>,
) -> Response {
    let Ok(shopper) = shopper else {
        return back_to_checkout("Your session had ended. Please check your cart and try again.");
    };
    let faults = FaultRequest::from_headers(&headers);
    let Ok(key) = IdempotencyKey::parse(&form.idempotency_key) else {
        return back_to_checkout("The form was incomplete. Please try again.");
    };
    let started = Instant::now();
    loop {
        match attempt(&idem, &db, &shopper.id, &key, &faults).await {
            Attempt::Done(response) => return response,
            Attempt::Busy if started.elapsed() < WAIT_FOR_FIRST => {
                tokio::time::sleep(POLL_EVERY).await
            }
            Attempt::Busy => {
                return back_to_checkout(
                    "Your order is still being processed. Check My orders in a moment.",
                )
            }
        }
    }
}

enum Attempt {
    Done(Response),
    Busy,
}

async fn attempt(
    idem: &Idempotency,
    db: &PgPool,
    session_id: &str,
    key: &IdempotencyKey,
    faults: &FaultRequest,
) -> Attempt {
    // A key this session already used answers for itself, even once the cart is empty.
    let body = match cart::read(db, session_id).await {
        Ok(cart) if !cart.lines.is_empty() => app::dto::order_request(&cart),
        Ok(_) => return known_key(db, session_id, key, "Your cart is empty.").await,
        Err(_) => return Attempt::Done(back_to_checkout(TRY_AGAIN)),
    };
    let new_order = match NewOrder::parse(&body) {
        Ok(order) => order,
        Err(e) => return Attempt::Done(back_to_checkout(&e.to_string())),
    };
    let request = IdempotentRequest::new(session_id, key.clone(), orders::CREATE_ORDER, &body)
        .with_faults(faults.clone());
    let response = orders::create_order(idem, request, new_order).await;
    match response.status() {
        StatusCode::CREATED => Attempt::Done(to_order_page(&response)),
        StatusCode::CONFLICT => Attempt::Busy,
        StatusCode::UNPROCESSABLE_ENTITY => match refusal_detail(response).await {
            // The key named another cart: answer from what it holds.
            None => known_key(db, session_id, key, CART_CHANGED).await,
            Some(reason) => Attempt::Done(back_to_checkout(&reason)),
        },
        status if status.is_client_error() => Attempt::Done(back_to_checkout(
            "The shop could not accept this order. Please check your cart.",
        )),
        _ => Attempt::Done(back_to_checkout(TRY_AGAIN)),
    }
}

const CART_CHANGED: &str = "Your cart changed since this page was shown. Please review it.";
const TRY_AGAIN: &str = "The shop could not place your order just now. Please try again.";

/// The shopper-readable reason of a business refusal; `None` for `idempotency-key-reused`.
async fn refusal_detail(response: Response) -> Option<String> {
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .ok()?;
    let problem: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let kind = problem["type"].as_str()?;
    if kind.ends_with("/idempotency-key-reused") {
        return None;
    }
    Some(problem["detail"].as_str()?.to_owned())
}

/// Answers from what the key already holds: its order, or the reason it was refused;
/// `otherwise` when it holds neither.
async fn known_key(
    db: &PgPool,
    session_id: &str,
    key: &IdempotencyKey,
    otherwise: &str,
) -> Attempt {
    match idempotency::status::lookup(db, session_id, key).await {
        Ok(Some(status)) if status.state == "completed" => match status.location {
            Some(location) => Attempt::Done(redirect_to_order(&location)),
            None => Attempt::Done(back_to_checkout("The shop refused this order.")),
        },
        Ok(Some(status)) if status.state == "processing" => Attempt::Busy,
        Ok(_) => Attempt::Done(back_to_checkout(otherwise)),
        Err(_) => Attempt::Done(back_to_checkout(TRY_AGAIN)),
    }
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

fn back_to_checkout(problem: &str) -> Response {
    let query: String = url_encode(problem);
    Redirect::to(&format!("/checkout?problem={query}")).into_response()
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
