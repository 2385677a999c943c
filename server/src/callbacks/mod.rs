//! `POST /webhooks/provider`: the provider's callbacks (ARCHITECTURE.md §7).
//!
//! 1. The signature is checked first; a bad, missing or stale one is a 4xx and nothing is stored.
//! 2. `INSERT INTO payment_callbacks … ON CONFLICT DO NOTHING`, keyed by the provider's
//!    transaction number: a duplicate delivery conflicts, answers 200 and changes nothing.
//! 3. A new callback is applied in the same transaction, through the same idempotent code
//!    as the charge call (`payments::apply`). A callback whose amount does not match the
//!    order is recorded as refused and logged, never credited.
//!
//! A transient failure rolls back all of it and answers 503, so the provider retries.

pub mod signature;

use std::sync::Arc;

use axum::{
    body::Bytes,
    extract::{rejection::BytesRejection, FromRef, State},
    http::HeaderMap,
    routing::post,
    Json, Router,
};
use serde::Deserialize;
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::{
    error::ApiError,
    payments::apply::{self, ApplyError, ChargeFacts},
    startup::AppState,
};
use signature::SignatureError;

/// The secrets that may sign callbacks.
#[derive(Clone)]
pub struct WebhookSecrets(pub Arc<Vec<String>>);

impl FromRef<AppState> for WebhookSecrets {
    fn from_ref(state: &AppState) -> Self {
        Self(Arc::new(state.config.webhook_secrets.clone()))
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/provider", post(receive))
}

#[derive(Debug, Deserialize)]
struct ProviderEvent {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    tx_no: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    charge_id: String,
    amount_cents: i64,
    currency: String,
    reference: String,
    failure_code: Option<String>,
}

async fn receive(
    State(db): State<PgPool>,
    State(secrets): State<WebhookSecrets>,
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
    let event: ProviderEvent = serde_json::from_value(payload.clone()).map_err(invalid)?;
    let outcome = record_and_apply(&db, &event, payload).await?;
    Ok(Json(json!({ "received": true, "outcome": outcome })))
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

async fn record_and_apply(
    db: &PgPool,
    event: &ProviderEvent,
    payload: serde_json::Value,
) -> Result<&'static str, ApiError> {
    let mut tx = db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO payment_callbacks (provider_tx_no, event_id, event_type, charge_id, payload)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT ON CONSTRAINT payment_callbacks_pkey DO NOTHING",
    )
    .bind(&event.tx_no)
    .bind(&event.id)
    .bind(&event.event_type)
    .bind(&event.data.charge_id)
    .bind(payload)
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        tx.commit().await?;
        return Ok("duplicate");
    }
    let outcome = apply(&mut tx, event).await?;
    sqlx::query("UPDATE payment_callbacks SET outcome = $2 WHERE provider_tx_no = $1")
        .bind(&event.tx_no)
        .bind(outcome)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(outcome)
}

async fn apply(tx: &mut PgConnection, event: &ProviderEvent) -> Result<&'static str, ApiError> {
    let Ok(payment_id) = Uuid::parse_str(&event.data.reference) else {
        tracing::error!(tx_no = %event.tx_no, reference = %event.data.reference, "callback for an unknown reference");
        return Ok("unknown_payment");
    };
    let result = match event.event_type.as_str() {
        "charge.succeeded" => {
            let facts = ChargeFacts {
                charge_id: event.data.charge_id.clone(),
                amount_cents: event.data.amount_cents,
                currency: event.data.currency.clone(),
            };
            apply::charge_succeeded(tx, payment_id, &facts)
                .await
                .map(drop)
        }
        "charge.failed" => {
            let code = event.data.failure_code.as_deref().unwrap_or("declined");
            apply::charge_failed(tx, payment_id, &event.data.charge_id, code).await
        }
        _ => return Ok("ignored"),
    };
    match result {
        Ok(()) => Ok("applied"),
        Err(ApplyError::Database(e)) => Err(e.into()),
        Err(refused) => {
            tracing::error!(tx_no = %event.tx_no, error = %refused, "provider callback refused; flagged for an operator");
            Ok(match refused {
                ApplyError::AmountMismatch { .. } => "amount_mismatch",
                ApplyError::SecondSuccess(_) => "second_success",
                _ => "unknown_payment",
            })
        }
    }
}
