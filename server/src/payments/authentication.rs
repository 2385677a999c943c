//! The shopper's bank step (3-D Secure, with Stripe): `POST
//! /api/orders/{id}/payments/{payment_id}/authentication` tells the browser what it needs for
//! the step, and, once the bank has answered, applies what the provider says of the charge
//! (docs/payments.md, "3-D Secure").
//!
//! The browser's word is never the outcome: the attempt's intent is read back from the
//! provider, and its charge applied with the same idempotent code a callback uses. So the
//! call is safe to repeat, and needs no Idempotency-Key: a double click, a reload, the
//! bank's answer arriving twice, or a webhook that settled the attempt first all end in the
//! one outcome the provider holds.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use once_axum::Reply;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::{
    apply, reply_for,
    store::{self, AuthenticationTurn},
};
use crate::{
    error::ApiError,
    payment_provider::{AttemptRef, Provider, FAILED, SUCCEEDED},
    session::Shopper,
};

/// A payment still waiting: for the shopper's bank, or for the provider.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Waiting {
    /// `pending`.
    #[schema(example = "pending")]
    pub status: &'static str,
    /// Stripe.js's `handleNextAction({clientSecret})` runs the bank's step with it; absent
    /// when the payment waits for the provider, not the shopper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

/// Continue a payment the shopper's bank must confirm
///
/// Answers 202 with the `client_secret` Stripe.js needs while the bank waits for the
/// shopper; once the bank has answered, the payment's outcome as `pay_order` answers it
/// (201 paid, 402 declined). Safe to repeat: the outcome is read from the provider, at
/// most once a second per payment (429 `authentication-checked-recently` in between).
#[utoipa::path(
    post,
    path = "/orders/{id}/payments/{payment_id}/authentication",
    operation_id = "continue_authentication",
    tag = "payments",
    params(
        ("id" = Uuid, Path, description = "The order."),
        ("payment_id" = Uuid, Path, description = "Its payment attempt."),
    ),
    responses(
        (status = 201, description = "The payment succeeded; the order is paid.", body = super::store::PaymentView),
        (status = 202, description = "Still waiting, for the shopper's bank or the provider.", body = Waiting),
    ),
    security(("session" = [])),
    extensions(("x-problems" = json!([
        "not-found", "card-declined", "order-not-payable", "payment-closed",
        "authentication-checked-recently"
    ]))),
)]
pub(super) async fn authentication(
    State(db): State<PgPool>,
    State(provider): State<Provider>,
    shopper: Shopper,
    Path((id, payment_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let parse = |s: &str| Uuid::parse_str(s).map_err(|_| ApiError::NotFound);
    let (order_id, payment_id) = (parse(&id)?, parse(&payment_id)?);
    let attempt = store::attempt_of(&db, &shopper.id, order_id, payment_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    if attempt.status != "pending" {
        let mut tx = db.begin().await?;
        return Ok(respond(reply_for(&mut tx, payment_id).await?));
    }
    match store::authentication_turn(&db, payment_id).await? {
        // Nothing the shopper can do: the callback or the settle ends it.
        AuthenticationTurn::NotWaiting => return Ok(waiting(None)),
        AuthenticationTurn::TooSoon => {
            return Err(ApiError::TooManyRequests {
                problem: "authentication-checked-recently",
                detail: "this payment's bank step was looked up less than a second ago; \
                         nothing was done"
                    .to_owned(),
                retry_after_secs: 1,
            })
        }
        AuthenticationTurn::Taken => {}
    }
    let asked = AttemptRef {
        payment_id,
        intent_id: attempt.provider_intent_id.as_deref(),
    };
    let charge = match provider.current_charge(&asked).await? {
        Some(charge) if charge.status == SUCCEEDED || charge.status == FAILED => charge,
        waits => return Ok(waiting(waits.and_then(|c| c.authentication))),
    };
    let mut tx = db.begin().await?;
    if charge.status == SUCCEEDED {
        apply::charge_succeeded(&mut tx, payment_id, &apply::ChargeFacts::of(&charge)).await?;
    } else {
        // The browser holds the intent's client secret, with which a refused intent could be
        // confirmed again with another card: it is cancelled before the refusal is applied.
        // Should the intent have succeeded meanwhile, that is what is applied.
        let stopped = provider.final_charges(&asked).await?;
        match stopped.iter().find(|c| c.status == SUCCEEDED) {
            Some(paid) => {
                apply::charge_succeeded(&mut tx, payment_id, &apply::ChargeFacts::of(paid)).await?;
            }
            None => {
                let code = charge.failure_code.as_deref().unwrap_or("declined");
                apply::charge_failed(&mut tx, payment_id, Some(&charge.id), code).await?;
            }
        }
    }
    let reply = reply_for(&mut tx, payment_id).await?;
    tx.commit().await?;
    Ok(respond(reply))
}

/// 202: the payment still waits, with what the bank's step needs when it waits for that.
fn waiting(client_secret: Option<String>) -> Response {
    let body = Waiting {
        status: "pending",
        client_secret,
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// The outcome as `pay_order` answers it, sent once (nothing here is stored with a key).
fn respond(reply: Reply) -> Response {
    once_axum::reply::respond(reply.into_stored(), false)
}
