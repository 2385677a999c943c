//! Applying a charge's outcome — from the charge call or from a provider callback, the same
//! code either way. Idempotent and forward-only: applying twice changes nothing the second
//! time, an order only moves `pending_payment → paid`, and money is never taken from the
//! callback: its amount is only checked against the order's total.
//!
//! A payment attempt moves
//!
//! ```text
//! pending ──succeeded, order payable──────▶ succeeded
//! pending ──succeeded, order paid/cancelled▶ refund_due   (money owed back; payment.refund_due)
//! pending ──declined──────────────────────▶ failed
//! failed  ──late success, order payable───▶ succeeded    (the money was taken: honour it)
//! failed  ──late success, order not payable▶ refund_due
//! ```
//!
//! and never back: a late decline never undoes a success.

use once_events::outbox;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::payment_provider::Charge;

/// What the provider says was charged.
pub struct ChargeFacts {
    pub charge_id: String,
    pub amount_cents: i64,
    pub currency: String,
}

impl ChargeFacts {
    pub fn of(charge: &Charge) -> Self {
        Self {
            charge_id: charge.id.clone(),
            amount_cents: charge.amount_cents,
            currency: charge.currency.clone(),
        }
    }
}

/// What applying a success did.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// The attempt succeeded and the order is now paid (`order.paid` written).
    Paid,
    /// This success was applied before: nothing changed.
    AlreadyApplied,
    /// The order could no longer take the money (paid by another charge, cancelled): the
    /// attempt is `refund_due` and `payment.refund_due` was written.
    RefundDue,
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
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

struct Target {
    payment_status: String,
    order_id: Uuid,
    order_status: String,
    total_cents: i64,
    currency: String,
}

/// Applies a succeeded charge to its attempt and order; see the module's state diagram.
pub async fn charge_succeeded(
    tx: &mut PgConnection,
    payment_id: Uuid,
    charge: &ChargeFacts,
) -> Result<Applied, ApplyError> {
    let target = lock_target(tx, payment_id).await?;
    if charge.amount_cents != target.total_cents || charge.currency != target.currency {
        return Err(ApplyError::AmountMismatch {
            charged: charge.amount_cents,
            expected: target.total_cents,
            currency: charge.currency.clone(),
        });
    }
    // `refunded` is final too: a success that arrives after its refund changes nothing.
    if matches!(
        target.payment_status.as_str(),
        "succeeded" | "refund_due" | "refunded"
    ) {
        return Ok(Applied::AlreadyApplied);
    }
    if target.order_status != "pending_payment" {
        owe_refund(tx, payment_id, target.order_id, charge).await?;
        return Ok(Applied::RefundDue);
    }
    set_status(tx, payment_id, "succeeded", charge).await?;
    mark_order_paid(tx, target.order_id, payment_id, charge).await?;
    Ok(Applied::Paid)
}

/// Locks the attempt's order, then the attempt: the order first, as every path that pays an
/// order does (`store::begin_attempt` locks it to insert an attempt), so two of them never
/// wait for each other in a cycle.
async fn lock_target(tx: &mut PgConnection, payment_id: Uuid) -> Result<Target, ApplyError> {
    let order = sqlx::query!(
        "SELECT id, status, total_cents, currency FROM orders
          WHERE id = (SELECT order_id FROM payments WHERE id = $1) FOR NO KEY UPDATE",
        payment_id,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApplyError::UnknownPayment(payment_id))?;
    let payment_status = sqlx::query_scalar!(
        "SELECT status FROM payments WHERE id = $1 FOR NO KEY UPDATE",
        payment_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(Target {
        payment_status,
        order_id: order.id,
        order_status: order.status,
        total_cents: order.total_cents,
        currency: order.currency,
    })
}

async fn set_status(
    tx: &mut PgConnection,
    payment_id: Uuid,
    status: &str,
    charge: &ChargeFacts,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE payments SET status = $2, provider_charge_id = $3, failure_code = NULL, updated_at = now()
          WHERE id = $1",
        payment_id,
        status,
        charge.charge_id,
    )
    .execute(tx)
    .await?;
    Ok(())
}

fn event_payload(order_id: Uuid, payment_id: Uuid, charge: &ChargeFacts) -> serde_json::Value {
    serde_json::json!({
        "order_id": order_id,
        "payment_id": payment_id,
        "charge_id": charge.charge_id,
        "amount_cents": charge.amount_cents,
        "currency": charge.currency,
    })
}

async fn mark_order_paid(
    tx: &mut PgConnection,
    order_id: Uuid,
    payment_id: Uuid,
    charge: &ChargeFacts,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE orders SET status = 'paid', updated_at = now() WHERE id = $1 AND status = 'pending_payment'",
        order_id,
    )
    .execute(&mut *tx)
    .await?;
    let payload = event_payload(order_id, payment_id, charge);
    outbox::record(tx, "order", order_id, "order.paid", payload).await?;
    Ok(())
}

/// A success the order cannot take: recorded as money owed back, announced for the refund.
async fn owe_refund(
    tx: &mut PgConnection,
    payment_id: Uuid,
    order_id: Uuid,
    charge: &ChargeFacts,
) -> Result<(), sqlx::Error> {
    tracing::warn!(payment = %payment_id, order = %order_id, "a charge succeeded for an order that cannot take it; refund due");
    set_status(tx, payment_id, "refund_due", charge).await?;
    let payload = event_payload(order_id, payment_id, charge);
    outbox::record(tx, "payment", payment_id, "payment.refund_due", payload).await?;
    Ok(())
}

/// A declined charge: the attempt fails, unless it already has an outcome (a late
/// `charge.failed` never undoes a success). Returns whether the attempt changed; an
/// attempt that does not exist is [`ApplyError::UnknownPayment`].
pub async fn charge_failed(
    tx: &mut PgConnection,
    payment_id: Uuid,
    charge_id: Option<&str>,
    code: &str,
) -> Result<bool, ApplyError> {
    let known = sqlx::query_scalar!(
        r#"WITH failed AS (
            UPDATE payments SET status = 'failed', provider_charge_id = coalesce(provider_charge_id, $2),
                   failure_code = $3, updated_at = now()
             WHERE id = $1 AND status = 'pending' RETURNING id)
         SELECT EXISTS (SELECT 1 FROM failed) AS "changed!" FROM payments WHERE id = $1"#,
        payment_id,
        charge_id,
        code,
    )
    .fetch_optional(tx)
    .await?;
    known.ok_or(ApplyError::UnknownPayment(payment_id))
}
