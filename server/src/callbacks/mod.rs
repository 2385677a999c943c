//! `POST /webhooks/provider`: the provider's callbacks (docs/design.md, "Provider callbacks").
//!
//! 1. The signature is checked first; a bad, missing or stale one is a 4xx and nothing is stored.
//! 2. `INSERT INTO payment_callbacks … ON CONFLICT DO NOTHING`, keyed by the provider's
//!    transaction number: a duplicate delivery conflicts, answers 200 and changes nothing.
//! 3. A new callback is applied in the same transaction, through the same idempotent code
//!    as the charge call (`payments::apply`). A callback whose amount does not match the
//!    order is recorded as refused and logged, never credited.
//!
//! Between 1 and 2, a callback that could change its attempt is confirmed with the provider,
//! its charge and its status ([`confirm`]); an unconfirmed one is recorded and never applied.
//!
//! A transient failure rolls back all of it and answers 503, so the provider retries.

mod confirm;
mod outcome;
pub mod signature;

use std::sync::Arc;

use axum::{
    body::Bytes,
    extract::{rejection::BytesRejection, FromRef, State},
    http::HeaderMap,
    Json,
};
use serde::Deserialize;
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::{
    error::ApiError,
    journal::{self, Actor},
    payments::apply::{self, Applied, ApplyError, ChargeFacts},
    provider_client::ProviderClient,
    state::AppState,
};
use outcome::Outcome;
use signature::SignatureError;

/// The secrets that may sign callbacks.
#[derive(Clone)]
pub struct WebhookSecrets(pub Arc<Vec<String>>);

impl FromRef<AppState> for WebhookSecrets {
    fn from_ref(state: &AppState) -> Self {
        Self(Arc::new(state.config.webhook_secrets.clone()))
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

/// The envelope every provider event shares. `data` is read only for the kinds we know.
#[derive(Debug, Deserialize)]
struct ProviderEvent {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    tx_no: String,
    #[serde(default)]
    data: serde_json::Value,
}

/// The data of `charge.succeeded` and `charge.failed`.
#[derive(Debug, Deserialize)]
struct ChargeData {
    charge_id: String,
    amount_cents: i64,
    currency: String,
    reference: String,
    failure_code: Option<String>,
}

/// What the callback says, once understood.
enum Event {
    Succeeded(ChargeData),
    Failed(ChargeData),
    /// A kind this shop does not act on; acknowledged so the provider stops retrying it.
    Other,
    /// A kind we know whose data is not the shape of that kind. It is signed, so it came
    /// from the provider, and sending it again will not change it: recorded, acknowledged.
    Malformed,
    /// A charge the provider does not list for the attempt with the status claimed
    /// ([`confirm`]): recorded, acknowledged, never applied.
    Unconfirmed(ChargeData),
    /// A success or a decline for an attempt already past it, whose amount is the order's
    /// ([`confirm`]): applying it would change nothing, so it is only recorded.
    Settled(ChargeData),
}

fn understand(event: &ProviderEvent) -> Event {
    let data = || serde_json::from_value::<ChargeData>(event.data.clone());
    match (event.event_type.as_str(), data()) {
        ("charge.succeeded", Ok(data)) => Event::Succeeded(data),
        ("charge.failed", Ok(data)) => Event::Failed(data),
        ("charge.succeeded" | "charge.failed", Err(_)) => Event::Malformed,
        _ => Event::Other,
    }
}

/// A provider event (`charge.succeeded`, `charge.failed`), applied once
///
/// Sent by the payment provider, not by shops' clients. Deliveries of the same event (its
/// `tx_no`) after the first answer 200 and change nothing; a 503 asks the provider to retry.
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
    State(secrets): State<WebhookSecrets>,
    State(provider): State<ProviderClient>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let body = body.map_err(|_| ApiError::PayloadTooLarge)?;
    let header = headers.get("once-signature").and_then(|v| v.to_str().ok());
    signature::verify(header, &body, &secrets.0, chrono::Utc::now().timestamp()).map_err(refuse)?;
    // Parsed once; the raw JSON is kept with the callback row for operators.
    let invalid = |e: serde_json::Error| {
        ApiError::bad_request(
            "invalid-callback",
            format!("the callback body is not valid: {e}"),
        )
    };
    let payload: serde_json::Value = serde_json::from_slice(&body).map_err(invalid)?;
    if !storable(&payload) {
        // PostgreSQL's text and jsonb cannot hold a NUL (`\u0000`): refused as malformed
        // rather than failing the insert with a 500 the provider would retry forever.
        return Err(ApiError::bad_request(
            "invalid-callback",
            "the callback body contains a NUL character (\\u0000)",
        ));
    }
    let envelope: ProviderEvent = serde_json::from_value(payload.clone()).map_err(invalid)?;
    let event = confirm::confirmed(&db, &provider, understand(&envelope)).await?;
    let outcome = record_and_apply(&db, &envelope, &event, payload).await?;
    Ok(Json(json!({ "received": true, "outcome": outcome })))
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

fn refuse(e: SignatureError) -> ApiError {
    tracing::warn!(error = %e, "provider callback refused");
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
    envelope: &ProviderEvent,
    event: &Event,
    payload: serde_json::Value,
) -> Result<&'static str, ApiError> {
    let mut tx = db.begin().await?;
    journal::acting_as(&mut tx, Actor::Callback).await?;
    let (charge_id, reference) = match event {
        Event::Succeeded(d) | Event::Failed(d) | Event::Unconfirmed(d) | Event::Settled(d) => {
            (Some(d.charge_id.as_str()), Some(d.reference.as_str()))
        }
        Event::Other | Event::Malformed => (None, None),
    };
    let inserted = sqlx::query!(
        "INSERT INTO payment_callbacks (provider_tx_no, event_id, event_type, charge_id, payload)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT ON CONSTRAINT payment_callbacks_pkey DO NOTHING",
        envelope.tx_no,
        envelope.id,
        envelope.event_type,
        charge_id,
        payload,
    )
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        let (tx_no, kind) = (&envelope.tx_no, &envelope.event_type);
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
        envelope.tx_no,
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
    envelope: &ProviderEvent,
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
            tracing::error!(tx_no = %envelope.tx_no, constraint = ?e.constraint(), "provider callback refused by a constraint; flagged for an operator");
            Outcome::Conflict
        }
        Err(ApplyError::Database(e)) => return Err(e.into()),
        Err(refused) => {
            savepoint.rollback().await?;
            tracing::error!(tx_no = %envelope.tx_no, error = %refused, "provider callback refused; flagged for an operator");
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
        Event::Settled(_) => return Ok(Outcome::AlreadyApplied),
    };
    let Ok(payment_id) = Uuid::parse_str(&data.reference) else {
        return Ok(Outcome::UnknownPayment);
    };
    if let Event::Failed(_) = event {
        let code = data.failure_code.as_deref().unwrap_or("declined");
        let changed = apply::charge_failed(tx, payment_id, Some(&data.charge_id), code).await?;
        return Ok(if changed {
            Outcome::Applied
        } else {
            Outcome::AlreadyApplied
        });
    }
    let facts = ChargeFacts {
        charge_id: data.charge_id.clone(),
        amount_cents: data.amount_cents,
        currency: data.currency.clone(),
    };
    Ok(
        match apply::charge_succeeded(tx, payment_id, &facts).await? {
            Applied::Paid => Outcome::Applied,
            Applied::AlreadyApplied => Outcome::AlreadyApplied,
            Applied::RefundDue => Outcome::RefundDue,
        },
    )
}
