//! Payments: `POST /api/orders/{id}/payments` charges the payment provider (the sandbox or
//! Stripe, behind `payment_provider`) through the idempotency executor, in recovery points ("atomic phases"):
//!
//! 1. the payment attempt row commits on its own ([`store::begin_attempt`]), stamped with
//!    the start of its first charge call; a retry of the same request finds the same
//!    attempt, and stamps each call it makes;
//! 2. the provider is charged with *its* Idempotency-Key derived from the attempt id
//!    ([`crate::payment_provider`]; an intent the provider makes first is recorded on the
//!    attempt before it is confirmed), so a retry after a lost response is replayed by the provider, never
//!    charged twice; transient provider errors are retried with backoff and full jitter;
//! 3. the outcome is applied ([`apply`], the same idempotent code a callback uses) in the
//!    transaction that completes the key.
//!
//! At most one attempt per order is in flight: the partial unique index
//! `payments_one_pending_per_order` refuses a second pending attempt (another key, another
//! tab) with 409 `payment-in-progress` before anything is charged. An attempt whose outcome
//! is unknown (provider unreachable, an answer that is neither succeeded nor failed) stays
//! pending: the same key resumes it, a callback settles it; it is never guessed declined.
//!
//! `GET /api/orders/{id}/payments` lists an order's payment attempts.
//!
//! The store and [`apply`] answer in domain terms; `problems` turns those into the HTTP
//! problems.

pub mod apply;
mod authentication;
mod gate;
pub mod instrument;
mod problems;
pub mod settle;
pub mod store;

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    response::Response,
    Json,
};
use once_axum::{PgTx, Reply};
use sqlx::{PgConnection, PgPool};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::{
    config::Config,
    error::ApiError,
    extract::ApiJson,
    idempotency::{RequestExecutor, RequestKey},
    openapi::IdempotencyKeyHeader,
    payment_provider::{ChargeOrder, Instrument, Provider, FAILED, SUCCEEDED},
    session::{NamedShopper, Shopper},
    state::AppState,
};
use gate::AttemptGate;
use instrument::PayBody;
use settle::SettleRules;
use store::{AttemptKey, AttemptRefused, PaymentView};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, pay))
        .routes(routes!(authentication::authentication))
}

/// The identity of "pay this order" in the idempotency table.
fn pay_operation(order_id: Uuid) -> String {
    format!("POST /api/orders/{order_id}/payments")
}

/// Pay an order, charged exactly once per Idempotency-Key
///
/// The provider is called with a key derived from this payment, so a retry after a lost
/// answer is replayed by the provider, never charged twice. Retry with the same key on 409
/// `request-in-progress` and on 5xx; a payment whose outcome is unknown stays pending and
/// the order shows the result once the provider's callback settles it.
#[utoipa::path(
    post,
    path = "/orders/{id}/payments",
    operation_id = "pay_order",
    tag = "payments",
    params(("id" = Uuid, Path, description = "The order to pay."), IdempotencyKeyHeader),
    request_body(content = PayBody, example = json!({"card_number": "4242 4242 4242 4242"})),
    responses((status = 201, description = "The charge succeeded; the order is paid.", body = PaymentView,
        headers(
            ("Location" = String, description = "The order's payments, `/api/orders/{id}/payments`."),
        )),
        (status = 202, description = "The shopper's bank must confirm the payment (3-D Secure, with Stripe): `needs_authentication` is true; continue with `continue_authentication`.", body = PaymentView)),
    security(("session" = [])),
    extensions(("x-problems" = json!([
        "payment-in-progress", "not-found",
        "card-declined", "unsupported-media-type", "malformed-json", "invalid-body",
        "invalid-card", "order-not-payable", "payment-closed", "payment-not-accepted",
        "payload-too-large"
    ]))),
)]
async fn pay(
    RequestExecutor(idem): RequestExecutor,
    State(provider): State<Provider>,
    State(config): State<Arc<Config>>,
    // Named by the cookie, not loaded: the executor's first read asks whether the store knows
    // the session in the statement that reads the key, so a payment and each of its repeats
    // cost no read of the session of their own (docs/protocol.md, "Repeats from memory").
    shopper: NamedShopper,
    Path(id): Path<String>,
    key: RequestKey,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let order_id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound)?;
    let instrument = instrument::parse(&body, provider.instrument())?;
    let request = key.for_body(&shopper.id, &pay_operation(order_id), &body);
    let attempt = AttemptKey {
        scope: request.scope.clone(),
        key: request.key.to_string(),
    };
    let rules = SettleRules {
        lease: idem.lease,
        grace: config.payment_settle_grace,
    };
    Ok(idem
        .execute(request, move |db| {
            charge_order(
                db, provider, rules, shopper.id, order_id, attempt, instrument,
            )
        })
        .await)
}

/// The three recovery points; see the module documentation.
async fn charge_order(
    db: PgPool,
    provider: Provider,
    rules: SettleRules,
    shopper_id: String,
    order_id: Uuid,
    attempt: AttemptKey,
    instrument: Instrument,
) -> Result<(PgTx, Reply), ApiError> {
    let payment = match store::begin_attempt(&db, &shopper_id, order_id, &attempt).await {
        // Another intent's attempt is pending: settle it if it was abandoned, then try again.
        Err(AttemptRefused::InProgress) => {
            settle::abandoned_attempt(&db, &provider, order_id, rules).await?;
            store::begin_attempt(&db, &shopper_id, order_id, &attempt).await?
        }
        found => found?,
    };
    // Every call first stamps the attempt, on a pending one only (see `settle`); a new
    // attempt's first call was stamped when it was recorded.
    let mut gate = AttemptGate {
        db: db.clone(),
        payment_id: payment.id,
        first_stamped: payment.stamped_now,
    };
    let charged = match payment.status.as_str() {
        "pending" => {
            let order = ChargeOrder {
                payment_id: payment.id,
                order_id,
                amount_cents: payment.amount_cents,
                currency: &payment.currency,
                instrument: &instrument,
                intent_id: payment.provider_intent_id.clone(),
            };
            provider.charge(&order, &mut gate).await
        }
        _ => Ok(None),
    };
    let charge = match charged {
        Ok(Some(charge)) => charge,
        // Settled since our last try (a callback, or another intent asking the provider):
        // answer from what it is now, and never charge it again.
        Ok(None) => {
            let mut tx = db.begin().await?;
            let reply = reply_for(&mut tx, payment.id).await?;
            return Ok((tx, reply));
        }
        // Refused by the provider itself: nothing was charged, so the attempt ends here
        // instead of blocking the order's next payment as a pending attempt.
        Err(refusal) if refusal.is_stored() => {
            let mut tx = db.begin().await?;
            apply::charge_failed(&mut tx, payment.id, None, "provider_rejected").await?;
            return Ok((tx, refusal.reply()));
        }
        Err(e) => return Err(e),
    };
    let mut tx = db.begin().await?;
    match charge.status.as_str() {
        SUCCEEDED => {
            let facts = apply::ChargeFacts::of(&charge);
            if apply::charge_succeeded(&mut tx, payment.id, &facts).await? == apply::Applied::Paid {
                // The attempt is what this charge made it: no need to read it back.
                let reply = paid(&PaymentView::succeeded(&payment, facts.charge_id))?;
                return Ok((tx, reply));
            }
        }
        FAILED => {
            let code = charge.failure_code.as_deref().unwrap_or("declined");
            apply::charge_failed(&mut tx, payment.id, Some(&charge.id), code).await?;
        }
        // The shopper's bank must confirm it (3-D Secure): pending, marked so, and answered
        // 202 for the browser to run the bank's step and then ask for the outcome
        // (`authentication`). A repeat of this key replays the same answer.
        _ if charge.authentication.is_some() => {
            store::await_authentication(&mut tx, payment.id).await?;
            let view = store::view(&mut tx, payment.id).await?;
            return Ok((tx, Reply::json(axum::http::StatusCode::ACCEPTED, &view)?));
        }
        // Neither: the outcome is not known yet. The attempt stays pending; a retry of the
        // same key asks again, a callback settles it.
        other => {
            return Err(ApiError::Unavailable(anyhow::anyhow!(
                "the provider reports charge {} as {other:?}; the attempt stays pending",
                charge.id
            )))
        }
    }
    let reply = reply_for(&mut tx, payment.id).await?;
    Ok((tx, reply))
}

/// The answer for an attempt, from the state it is in now.
async fn reply_for(tx: &mut PgConnection, payment_id: Uuid) -> Result<Reply, ApiError> {
    let view = store::view(tx, payment_id).await?;
    let code = view
        .failure_code
        .clone()
        .unwrap_or_else(|| "declined".into());
    Ok(match view.status.as_str() {
        "succeeded" => paid(&view)?,
        "refund_due" | "refunded" => ApiError::unprocessable(
            "order-not-payable",
            "the order was paid or cancelled meanwhile; this charge is refunded",
        )
        .reply(),
        "failed" if code == settle::NOT_CHARGED => ApiError::unprocessable(
            "payment-closed",
            "this payment stopped before the provider charged anything; please pay again",
        )
        .reply(),
        "failed" => ApiError::PaymentDeclined { code }.reply(),
        other => {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "payment {payment_id} is {other} after its outcome was applied"
            )))
        }
    })
}

/// The answer for a succeeded attempt.
fn paid(view: &PaymentView) -> Result<Reply, ApiError> {
    Ok(Reply::created(
        format!("/api/orders/{}/payments", view.order_id),
        view,
    )?)
}

/// The order's payment attempts, oldest first
#[utoipa::path(
    get,
    path = "/orders/{id}/payments",
    operation_id = "list_payments",
    tag = "payments",
    params(("id" = Uuid, Path, description = "The order.")),
    responses((status = 200, description = "Every attempt, with its status.", body = Vec<PaymentView>)),
    security((), ("session" = [])),
    extensions(("x-problems" = json!(["not-found"]))),
)]
async fn list(
    State(db): State<PgPool>,
    shopper: Shopper,
    Path(id): Path<String>,
) -> Result<Json<Vec<PaymentView>>, ApiError> {
    let order_id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound)?;
    Ok(Json(
        store::for_order(&db, &shopper.id, order_id)
            .await?
            .ok_or(ApiError::NotFound)?,
    ))
}
