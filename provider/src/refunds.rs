//! `POST /v1/refunds`: refunds a succeeded charge in full. Idempotent on the caller's
//! Idempotency-Key (the same key and parameters replay the refund; other parameters are
//! refused with 422), one refund per charge (`refunds_one_per_charge`), and announced by a
//! signed `charge.refunded` webhook queued in the same transaction.

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::{
    charge::Charge, charges::idempotency_key, error::ProviderError, settings::SharedSettings,
    state::ProviderState, webhooks,
};

pub fn router() -> Router<ProviderState> {
    Router::new().route("/v1/refunds", post(create))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundRequest {
    charge_id: String,
}

#[derive(Debug, Serialize)]
pub struct Refund {
    pub id: String,
    pub charge_id: String,
    pub amount_cents: i64,
    pub currency: String,
    pub reference: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

async fn create(
    State(db): State<PgPool>,
    State(settings): State<SharedSettings>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ProviderError> {
    let key = idempotency_key(&headers)?;
    let request: RefundRequest = serde_json::from_slice(&body).map_err(|e| {
        ProviderError::BadRequest("invalid_request", format!("invalid refund request: {e}"))
    })?;
    let fingerprint = hex::encode(Sha256::digest(request.charge_id.as_bytes()));
    let mut tx = db.begin().await?;
    let charge = sqlx::query_as!(
        Charge,
        r#"SELECT id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _"
           FROM charges WHERE id = $1 FOR UPDATE"#,
        request.charge_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ProviderError::NotFound)?;
    if let Some(response) = replay(&mut tx, &key, &fingerprint).await? {
        return Ok(response);
    }
    if charge.status != "succeeded" {
        return Err(ProviderError::BadRequest(
            "charge_not_refundable",
            format!("charge {} is {}", charge.id, charge.status),
        ));
    }
    let refund = sqlx::query_as!(
        Refund,
        r#"INSERT INTO refunds (id, charge_id, idempotency_key, request_fingerprint, amount_cents, currency, reference)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT ON CONSTRAINT refunds_one_per_charge DO NOTHING
         RETURNING id, charge_id, amount_cents, currency, reference, created_at AS "created_at: _""#,
        format!("re_{}", uuid::Uuid::new_v4().simple()),
        charge.id,
        key,
        fingerprint,
        charge.amount_cents,
        charge.currency,
        charge.reference,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(refund) = refund else {
        return Err(ProviderError::BadRequest(
            "charge_already_refunded",
            format!("charge {} was refunded under another key", charge.id),
        ));
    };
    let tx_no = format!("txn_{}", refund.id);
    webhooks::enqueue_event(
        &mut tx,
        &charge,
        "charge.refunded",
        &tx_no,
        &settings.get().chaos,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(refund = %refund.id, charge = %charge.id, "refund recorded");
    Ok((StatusCode::CREATED, Json(refund)).into_response())
}

/// The same key again (under the charge's lock): the stored refund if the parameters match.
async fn replay(
    tx: &mut sqlx::PgConnection,
    key: &str,
    fingerprint: &str,
) -> Result<Option<Response>, ProviderError> {
    let stored = sqlx::query!(
        r#"SELECT request_fingerprint, id, charge_id, amount_cents, currency, reference, created_at AS "created_at: chrono::DateTime<chrono::Utc>"
           FROM refunds WHERE idempotency_key = $1"#,
        key
    )
    .fetch_optional(&mut *tx)
    .await?
    .map(|row| {
        let refund = Refund {
            id: row.id,
            charge_id: row.charge_id,
            amount_cents: row.amount_cents,
            currency: row.currency,
            reference: row.reference,
            created_at: row.created_at,
        };
        (row.request_fingerprint, refund)
    });
    let Some((stored_fingerprint, refund)) = stored else {
        return Ok(None);
    };
    if stored_fingerprint != fingerprint {
        return Err(ProviderError::KeyReused);
    }
    Ok(Some(
        (
            StatusCode::CREATED,
            [("idempotent-replayed", "true")],
            Json(refund),
        )
            .into_response(),
    ))
}
