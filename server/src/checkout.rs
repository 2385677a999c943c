//! The checkout form without wasm: `POST /checkout`, form-encoded, the Idempotency-Key in a
//! hidden field. It goes through the same executor as `POST /api/orders`, with the same
//! route and body, so a native submit and the hydrated page's submit of one intent are one
//! request. It always ends in a redirect, never an error page:
//!
//! * the order exists (first execution or replay) → 303 to the order page;
//! * the first submit of this key is still running (a double click before hydration) →
//!   wait for it briefly, then 303 to the same order;
//! * refused → 303 back to the checkout with the reason.

use std::time::{Duration, Instant};

use axum::{
    extract::State,
    http::{HeaderMap, Method, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::post,
    Form, Router,
};
use serde::Deserialize;
use sqlx::PgPool;

use crate::{
    cart,
    faults::FaultRequest,
    idempotency::{self, executor::Idempotency, IdempotencyKey, IdempotentRequest},
    orders::{self, NewOrder},
    session::Shopper,
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
    shopper: Shopper,
    headers: HeaderMap,
    Form(form): Form<CheckoutForm>,
) -> Response {
    let faults = FaultRequest::from_headers(&headers);
    let Ok(key) = IdempotencyKey::parse(&form.idempotency_key) else {
        return back_to_checkout("The form was incomplete. Please try again.");
    };
    let started = Instant::now();
    loop {
        match attempt(&idem, &db, &shopper, &key, &faults).await {
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
    shopper: &Shopper,
    key: &IdempotencyKey,
    faults: &FaultRequest,
) -> Attempt {
    // A key this session already used answers for itself, even once the cart is empty.
    let body = match cart::read(db, &shopper.session).await {
        Ok(cart) if !cart.lines.is_empty() => app::dto::order_request(&cart),
        Ok(_) => return known_key(db, shopper, key).await,
        Err(_) => {
            return Attempt::Done(back_to_checkout(
                "Your cart could not be read. Please try again.",
            ))
        }
    };
    let request = IdempotentRequest {
        faults: faults.clone(),
        ..IdempotentRequest::new(&shopper.id, key.clone(), Method::POST, "/api/orders", &body)
    };
    let new_order = match NewOrder::parse(&body) {
        Ok(order) => order,
        Err(e) => return Attempt::Done(back_to_checkout(&e.to_string())),
    };
    let shopper_id = shopper.id.clone();
    let response = idempotency::execute(idem, request, move |db| {
        orders::store::create_in_new_tx(db, shopper_id, new_order)
    })
    .await;
    match response.status() {
        StatusCode::CREATED => {
            let _ = cart::clear(&shopper.session).await;
            Attempt::Done(to_order_page(&response))
        }
        StatusCode::CONFLICT => Attempt::Busy,
        StatusCode::UNPROCESSABLE_ENTITY => known_key(db, shopper, key).await,
        _ => Attempt::Done(back_to_checkout(
            "The shop could not place your order just now. Please try again.",
        )),
    }
}

/// Answers from what the key already holds: its order, or the reason it was refused.
async fn known_key(db: &PgPool, shopper: &Shopper, key: &IdempotencyKey) -> Attempt {
    match idempotency::status::lookup(db, &shopper.id, key).await {
        Ok(Some(status)) if status.state == "completed" => match status.location {
            Some(location) => Attempt::Done(redirect_to_order(&location)),
            None => Attempt::Done(back_to_checkout("The shop refused this order.")),
        },
        Ok(Some(status)) if status.state == "processing" => Attempt::Busy,
        Ok(_) => Attempt::Done(back_to_checkout("Your cart is empty.")),
        Err(_) => Attempt::Done(back_to_checkout(
            "The shop could not place your order just now. Please try again.",
        )),
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
