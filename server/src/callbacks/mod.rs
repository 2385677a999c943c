//! The provider's callbacks (docs/design.md, "Provider callbacks"): `POST /webhooks/provider`
//! from the sandbox, `POST /webhooks/stripe` from Stripe; only the route of the provider the
//! shop pays through is served and documented. Past the adapter's reading, both are
//! handled alike:
//!
//! 1. The signature is checked first (by the adapter); a bad, missing or stale one is a 4xx
//!    and nothing is stored.
//! 2. `INSERT INTO payment_callbacks … ON CONFLICT DO NOTHING`, keyed by what names the event
//!    in every delivery of it (the sandbox's transaction number, Stripe's event id): a
//!    duplicate delivery conflicts, answers 200 and changes nothing.
//! 3. A new callback is applied in the same transaction, through the same idempotent code
//!    as the charge call (`payments::apply`). A callback whose amount does not match the
//!    order is recorded as refused and logged, never credited.
//!
//! Between 1 and 2, a callback that could change its attempt is confirmed with the provider,
//! its charge and its status ([`confirm`]); an unconfirmed one is recorded and never applied.
//! A confirmed one is applied with the charge as the provider lists it: money is never read
//! from a callback, and a callback that disagrees with the provider's amount is a mismatch.
//!
//! A transient failure rolls back all of it and answers 503, so the provider retries.

mod confirm;
mod outcome;

use axum::{
    body::Bytes,
    extract::{rejection::BytesRejection, State},
    http::HeaderMap,
    Json,
};
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::{
    error::ApiError,
    journal::{self, Actor},
    payment_provider::{
        Charge, EventAbout, Provider, ReceivedEvent, SignatureError, WebhookRefusal,
    },
    payments::apply::{self, Applied, ApplyError, ChargeFacts},
    state::AppState,
};
use outcome::Outcome;

/// The route of the provider the shop pays through (`webhook_path`), and only that one: the
/// other is neither served nor documented.
pub fn router(webhook_path: &str) -> OpenApiRouter<AppState> {
    let router = OpenApiRouter::new();
    match webhook_path {
        STRIPE_PATH => router.routes(routes!(receive_stripe)),
        _ => router.routes(routes!(receive)),
    }
}

const STRIPE_PATH: &str = "/webhooks/stripe";

/// What the callback says, once understood.
enum Event {
    Succeeded(Charge),
    Failed(Charge),
    /// A kind this shop does not act on; acknowledged so the provider stops retrying it.
    Other,
    /// A kind we know whose data is not the shape of that kind. It is signed, so it came
    /// from the provider, and sending it again will not change it: recorded, acknowledged.
    Malformed,
    /// A charge the provider does not list for the attempt with the status claimed
    /// ([`confirm`]): recorded, acknowledged, never applied.
    Unconfirmed(Charge),
    /// A charge the provider lists for the attempt, with the status claimed, but for another
    /// amount or currency than the callback says ([`confirm`]): recorded as a mismatch,
    /// never applied.
    Disputed(Charge),
    /// A success or a decline for an attempt already past it, whose amount is the order's
    /// ([`confirm`]): applying it would change nothing, so it is only recorded.
    Settled(Charge),
}

fn understand(about: EventAbout) -> Event {
    match about {
        EventAbout::Succeeded(charge) => Event::Succeeded(charge),
        EventAbout::Failed(charge) => Event::Failed(charge),
        EventAbout::Malformed => Event::Malformed,
        EventAbout::Other => Event::Other,
    }
}

/// A sandbox provider event (`charge.succeeded`, `charge.failed`), applied once
///
/// Sent by the sandbox payment provider, not by shops' clients. Deliveries of the same event
/// (its `tx_no`) after the first answer 200 and change nothing; a 503 asks the provider to
/// retry. With `PAYMENT_PROVIDER=stripe` this route is not served.
#[utoipa::path(
    post,
    path = "/webhooks/provider",
    operation_id = "receive_provider_callback",
    tag = "provider",
    params(("Once-Signature" = String, Header,
        description = "`t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">` with a shared secret; within 300 s of now.",
        pattern = "^t=[0-9]{1,12}(,v1=[0-9a-f]{64}){1,4}$")),
    request_body(content = serde_json::Value, description = "The provider's event envelope: `id`, `type`, `tx_no`, `data`.",
        example = json!({"id": "evt_1", "type": "charge.succeeded", "tx_no": "tx_1",
            "data": {"charge_id": "ch_1", "amount_cents": 3600, "currency": "EUR", "reference": "<payment id>"}})),
    responses((status = 200, description = "Recorded; `outcome` says what it did (`applied`, `already_applied`, `ignored`, …).",
        body = serde_json::Value, example = json!({"received": true, "outcome": "applied"}))),
    extensions(("x-problems" = json!([
        "signature-missing", "signature-malformed", "signature-expired", "signature-invalid",
        "invalid-callback", "payload-too-large"
    ]))),
)]
async fn receive(
    State(db): State<PgPool>,
    State(provider): State<Provider>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    receive_at(&db, &provider, &headers, body).await
}

/// A Stripe event (`payment_intent.succeeded`, `payment_intent.payment_failed`), applied once
///
/// Sent by Stripe to the endpoint registered for the shop (docs/payments.md, "Going live
/// with Stripe"). Deliveries of the same event (its `id`) after the first answer 200 and
/// change nothing; a 503 asks Stripe to retry. With the sandbox provider this route is not
/// served.
#[utoipa::path(
    post,
    path = "/webhooks/stripe",
    operation_id = "receive_stripe_event",
    tag = "provider",
    params(("Stripe-Signature" = String, Header,
        description = "Stripe's `t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">` with the endpoint's signing secret; within 300 s of now.",
        pattern = "^t=[0-9]{1,12}(,v[01]=[0-9a-f]{64}){1,4}$")),
    request_body(content = serde_json::Value, description = "Stripe's event: `id`, `type`, `created`, `data.object` (a PaymentIntent).",
        example = json!({"id": "evt_1", "type": "payment_intent.succeeded", "created": 1764547200,
            "data": {"object": {"id": "pi_1", "object": "payment_intent", "status": "succeeded", "amount": 3600,
                "currency": "eur", "metadata": {"payment_id": "<payment id>", "order_id": "<order id>"}}}})),
    responses((status = 200, description = "Recorded; `outcome` says what it did (`applied`, `already_applied`, `ignored`, …).",
        body = serde_json::Value, example = json!({"received": true, "outcome": "applied"}))),
    extensions(("x-problems" = json!([
        "signature-missing", "signature-malformed", "signature-expired", "signature-invalid",
        "invalid-callback", "payload-too-large"
    ]))),
)]
async fn receive_stripe(
    State(db): State<PgPool>,
    State(provider): State<Provider>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    receive_at(&db, &provider, &headers, body).await
}

/// A callback at the route of the shop's provider (the only one served).
async fn receive_at(
    db: &PgPool,
    provider: &Provider,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let body = body.map_err(|_| ApiError::PayloadTooLarge)?;
    let now = chrono::Utc::now().timestamp();
    let received = provider.read_event(headers, &body, now).map_err(refuse)?;
    if !storable(&received.payload) {
        // PostgreSQL's text and jsonb cannot hold a NUL (`\u0000`): refused as malformed
        // rather than failing the insert with a 500 the provider would retry forever.
        return Err(ApiError::bad_request(
            "invalid-callback",
            "the callback body contains a NUL character (\\u0000)",
        ));
    }
    let ReceivedEvent {
        delivery_id,
        event_id,
        event_type,
        about,
        payload,
    } = received;
    let envelope = Envelope {
        delivery_id,
        event_id,
        event_type,
    };
    let event = confirm::confirmed(db, provider, understand(about)).await?;
    let outcome = record_and_apply(db, &envelope, &event, payload).await?;
    Ok(Json(json!({ "received": true, "outcome": outcome })))
}

/// What names a callback in its row.
struct Envelope {
    /// Every delivery of one event carries the same: the row's key.
    delivery_id: String,
    event_id: String,
    event_type: String,
}

/// Whether every string (and key) of a JSON value can be stored by PostgreSQL.
fn storable(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => !s.contains('\0'),
        Value::Array(items) => items.iter().all(storable),
        Value::Object(fields) => fields.iter().all(|(k, v)| !k.contains('\0') && storable(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => true,
    }
}

fn refuse(e: WebhookRefusal) -> ApiError {
    tracing::warn!(error = %e, "provider callback refused");
    let e = match e {
        WebhookRefusal::Signature(e) => e,
        WebhookRefusal::Invalid(why) => {
            return ApiError::bad_request(
                "invalid-callback",
                format!("the callback body is not valid: {why}"),
            )
        }
    };
    match e {
        SignatureError::Missing => ApiError::bad_request("signature-missing", e.to_string()),
        SignatureError::Malformed => ApiError::bad_request("signature-malformed", e.to_string()),
        SignatureError::Stale => ApiError::Unauthorized {
            problem: "signature-expired",
            detail: e.to_string(),
        },
        SignatureError::Mismatch => ApiError::Unauthorized {
            problem: "signature-invalid",
            detail: e.to_string(),
        },
    }
}

/// Records the callback (a duplicate stops here) and applies it, in one transaction. The
/// application runs in a savepoint: if the database refuses it (a constraint), the
/// refusal is recorded as the callback's outcome and answered 200, since delivering the
/// same callback again could never succeed.
async fn record_and_apply(
    db: &PgPool,
    envelope: &Envelope,
    event: &Event,
    payload: serde_json::Value,
) -> Result<&'static str, ApiError> {
    let mut tx = db.begin().await?;
    journal::acting_as(&mut tx, Actor::Callback).await?;
    let (charge_id, reference) = match event {
        Event::Succeeded(d)
        | Event::Failed(d)
        | Event::Unconfirmed(d)
        | Event::Disputed(d)
        | Event::Settled(d) => (Some(d.id.as_str()), Some(d.reference.as_str())),
        Event::Other | Event::Malformed => (None, None),
    };
    let inserted = sqlx::query!(
        "INSERT INTO payment_callbacks (provider_tx_no, event_id, event_type, charge_id, payload)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT ON CONSTRAINT payment_callbacks_pkey DO NOTHING",
        envelope.delivery_id,
        envelope.event_id,
        envelope.event_type,
        charge_id,
        payload,
    )
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        let (tx_no, kind) = (&envelope.delivery_id, &envelope.event_type);
        journal::duplicate_callback(&mut tx, tx_no, kind, charge_id, reference).await?;
        tx.commit().await?;
        return Ok("duplicate");
    }
    let outcome = match event {
        Event::Settled(_) => Outcome::AlreadyApplied,
        _ => apply_in_savepoint(&mut tx, envelope, event).await?,
    };
    sqlx::query!(
        "UPDATE payment_callbacks SET outcome = $2 WHERE provider_tx_no = $1",
        envelope.delivery_id,
        outcome.as_str(),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(outcome.as_str())
}

/// Applies the event in a savepoint: a refusal by the database (a constraint) rolls back
/// the application alone and becomes the callback's outcome.
async fn apply_in_savepoint(
    tx: &mut PgConnection,
    envelope: &Envelope,
    event: &Event,
) -> Result<Outcome, ApiError> {
    let mut savepoint = sqlx::Connection::begin(&mut *tx).await?;
    Ok(match apply(&mut savepoint, event).await {
        Ok(outcome) => {
            savepoint.commit().await?;
            outcome
        }
        Err(ApplyError::Database(sqlx::Error::Database(e))) if e.constraint().is_some() => {
            savepoint.rollback().await?;
            tracing::error!(tx_no = %envelope.delivery_id, constraint = ?e.constraint(), "provider callback refused by a constraint; flagged for an operator");
            Outcome::Conflict
        }
        Err(ApplyError::Database(e)) => return Err(e.into()),
        Err(refused) => {
            savepoint.rollback().await?;
            tracing::error!(tx_no = %envelope.delivery_id, error = %refused, "provider callback refused; flagged for an operator");
            Outcome::refused(&refused)
        }
    })
}

async fn apply(tx: &mut PgConnection, event: &Event) -> Result<Outcome, ApplyError> {
    let data = match event {
        Event::Succeeded(data) | Event::Failed(data) => data,
        Event::Other => return Ok(Outcome::Ignored),
        Event::Malformed => return Ok(Outcome::Malformed),
        Event::Unconfirmed(_) => return Ok(Outcome::Unconfirmed),
        Event::Disputed(_) => return Ok(Outcome::AmountMismatch),
        Event::Settled(_) => return Ok(Outcome::AlreadyApplied),
    };
    let Ok(payment_id) = Uuid::parse_str(&data.reference) else {
        return Ok(Outcome::UnknownPayment);
    };
    if let Event::Failed(_) = event {
        let code = data.failure_code.as_deref().unwrap_or("declined");
        let changed = apply::charge_failed(tx, payment_id, Some(&data.id), code).await?;
        return Ok(if changed {
            Outcome::Applied
        } else {
            Outcome::AlreadyApplied
        });
    }
    let facts = ChargeFacts::of(data);
    Ok(
        match apply::charge_succeeded(tx, payment_id, &facts).await? {
            Applied::Paid => Outcome::Applied,
            Applied::AlreadyApplied => Outcome::AlreadyApplied,
            Applied::RefundDue => Outcome::RefundDue,
        },
    )
}
