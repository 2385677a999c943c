//! Applying a charge's outcome — from the charge call or from a provider callback, the same
//! code either way. Idempotent and forward-only: applying twice changes nothing the second
//! time, an order only moves `pending_payment → paid`, and money is never taken from the
//! callback: its amount is only checked against the order's total.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::{error::ApiError, outbox};

/// What the provider says was charged.
pub struct ChargeFacts {
    pub charge_id: String,
    pub amount_cents: i64,
    pub currency: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("no payment attempt {0}")]
    UnknownPayment(Uuid),
    #[error("charged {charged} {currency} but the order totals {expected}")]
    AmountMismatch {
        charged: i64,
        expected: i64,
        currency: String,
    },
    #[error("order {0} already has another succeeded payment")]
    SecondSuccess(Uuid),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Database(e) => e.into(),
            other => ApiError::Internal(other.into()),
        }
    }
}

/// Returns `true` if this call moved the order to `paid` (and wrote `order.paid`).
pub async fn charge_succeeded(
    tx: &mut PgConnection,
    payment_id: Uuid,
    charge: &ChargeFacts,
) -> Result<bool, ApplyError> {
    let row: Option<(Uuid, i64, String)> = sqlx::query_as(
        "SELECT o.id, o.total_cents, o.currency FROM payments p JOIN orders o ON o.id = p.order_id
          WHERE p.id = $1 FOR UPDATE OF p, o",
    )
    .bind(payment_id)
    .fetch_optional(&mut *tx)
    .await?;
    let (order_id, total, currency) = row.ok_or(ApplyError::UnknownPayment(payment_id))?;
    if charge.amount_cents != total || charge.currency != currency {
        return Err(ApplyError::AmountMismatch {
            charged: charge.amount_cents,
            expected: total,
            currency: charge.currency.clone(),
        });
    }
    // The partial unique index payments_one_success_per_order would refuse a second success
    // anyway; asking first keeps the transaction usable for recording what happened.
    let other_success: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM payments WHERE order_id = $1 AND status = 'succeeded' AND id <> $2)",
    )
    .bind(order_id)
    .bind(payment_id)
    .fetch_one(&mut *tx)
    .await?;
    if other_success {
        return Err(ApplyError::SecondSuccess(order_id));
    }
    sqlx::query(
        "UPDATE payments SET status = 'succeeded', provider_charge_id = $2, failure_code = NULL, updated_at = now()
          WHERE id = $1 AND status <> 'succeeded'",
    )
    .bind(payment_id)
    .bind(&charge.charge_id)
    .execute(&mut *tx)
    .await?;
    mark_order_paid(tx, order_id, payment_id, charge).await
}

async fn mark_order_paid(
    tx: &mut PgConnection,
    order_id: Uuid,
    payment_id: Uuid,
    charge: &ChargeFacts,
) -> Result<bool, ApplyError> {
    let moved = sqlx::query("UPDATE orders SET status = 'paid', updated_at = now() WHERE id = $1 AND status = 'pending_payment'")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    if moved.rows_affected() == 0 {
        return Ok(false); // already paid (or beyond): the transition is done, nothing to announce
    }
    let payload = serde_json::json!({
        "order_id": order_id,
        "payment_id": payment_id,
        "charge_id": charge.charge_id,
        "amount_cents": charge.amount_cents,
        "currency": charge.currency,
    });
    outbox::record(tx, "order", order_id, "order.paid", payload).await?;
    Ok(true)
}

/// A declined charge: the attempt fails, unless it already has an outcome (a late
/// `charge.failed` never undoes a success).
pub async fn charge_failed(
    tx: &mut PgConnection,
    payment_id: Uuid,
    charge_id: &str,
    code: &str,
) -> Result<(), ApplyError> {
    sqlx::query(
        "UPDATE payments SET status = 'failed', provider_charge_id = coalesce(provider_charge_id, $2),
                failure_code = $3, updated_at = now()
          WHERE id = $1 AND status = 'pending'",
    )
    .bind(payment_id)
    .bind(charge_id)
    .bind(code)
    .execute(tx)
    .await?;
    Ok(())
}
