//! The SQL of payment attempts.

use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::error::{ApiError, OnConstraint};

/// The idempotency key of the request that made an attempt: the attempt's identity.
pub struct AttemptKey {
    pub scope: String,
    pub key: String,
}

#[derive(Debug, sqlx::FromRow)]
pub struct Attempt {
    pub id: Uuid,
    pub order_id: Uuid,
    pub amount_cents: i64,
    pub currency: String,
    /// `pending` unless something settled it since (a callback, or a lookup at the
    /// provider when another intent found it blocking the order).
    pub status: String,
    pub failure_code: Option<String>,
}

/// What the API shows of a payment.
#[derive(Debug, Serialize, sqlx::FromRow)]
pub struct PaymentView {
    pub id: Uuid,
    pub order_id: Uuid,
    pub status: String,
    pub amount_cents: i64,
    pub currency: String,
    pub provider_charge_id: Option<String>,
    pub failure_code: Option<String>,
}

/// Recovery point 1: records the attempt (amount from the order, never from the client), or
/// finds the one an earlier try of the same request recorded. Commits on its own. Another
/// attempt of the order still pending (another key) → 409 `payment-in-progress`.
pub async fn begin_attempt(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
    attempt: &AttemptKey,
) -> Result<Attempt, ApiError> {
    sqlx::query(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         SELECT $1, o.id, $3, $4, o.total_cents, o.currency FROM orders o
          WHERE o.id = $2 AND o.session_id = $5 AND o.status = 'pending_payment'
         ON CONFLICT ON CONSTRAINT payments_attempt_key DO NOTHING",
    )
    .bind(Uuid::new_v4())
    .bind(order_id)
    .bind(&attempt.scope)
    .bind(&attempt.key)
    .bind(session_id)
    .execute(db)
    .await
    .on_constraint("payments_one_pending_per_order", || {
        ApiError::PaymentInProgress
    })?;
    // FOR SHARE: if another intent is settling this attempt right now, wait for its answer
    // rather than charge an attempt that is being closed.
    let found: Option<Attempt> = sqlx::query_as(
        "SELECT id, order_id, amount_cents, currency, status, failure_code FROM payments
          WHERE idempotency_scope = $1 AND idempotency_key = $2 AND order_id = $3 FOR SHARE",
    )
    .bind(&attempt.scope)
    .bind(&attempt.key)
    .bind(order_id)
    .fetch_optional(db)
    .await?;
    match found {
        Some(attempt) => Ok(attempt),
        None => Err(why_not_payable(db, session_id, order_id).await?),
    }
}

async fn why_not_payable(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
) -> Result<ApiError, sqlx::Error> {
    let status: Option<String> =
        sqlx::query_scalar("SELECT status FROM orders WHERE id = $1 AND session_id = $2")
            .bind(order_id)
            .bind(session_id)
            .fetch_optional(db)
            .await?;
    Ok(match status {
        None => ApiError::NotFound,
        Some(status) => ApiError::unprocessable(
            "order-not-payable",
            format!("the order is {status}, not awaiting payment"),
        ),
    })
}

/// The order's pending attempt, locked, with whether the request that owns it may still be
/// running (its key leased, or its lease over for less than one more lease: a stalled
/// holder may wake up and call the provider).
pub async fn lock_pending_attempt(
    tx: &mut PgConnection,
    order_id: Uuid,
    lease: std::time::Duration,
) -> Result<Option<(Uuid, bool)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT p.id, EXISTS (
                    SELECT 1 FROM idempotency_keys k
                     WHERE k.scope = p.idempotency_scope AND k.key = p.idempotency_key
                       AND k.state = 'processing'
                       AND k.locked_until > now() - $2 * interval '1 millisecond') AS running
           FROM payments p WHERE p.order_id = $1 AND p.status = 'pending' FOR UPDATE OF p",
    )
    .bind(order_id)
    .bind(lease.as_millis() as i64)
    .fetch_optional(tx)
    .await
}

pub async fn view(tx: &mut PgConnection, payment_id: Uuid) -> Result<PaymentView, sqlx::Error> {
    sqlx::query_as("SELECT id, order_id, status, amount_cents, currency, provider_charge_id, failure_code FROM payments WHERE id = $1")
        .bind(payment_id)
        .fetch_one(tx)
        .await
}

/// The payments of one of the session's orders, oldest first; `None` if the order is not theirs.
pub async fn for_order(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
) -> Result<Option<Vec<PaymentView>>, sqlx::Error> {
    let owned: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM orders WHERE id = $1 AND session_id = $2)",
    )
    .bind(order_id)
    .bind(session_id)
    .fetch_one(db)
    .await?;
    if !owned {
        return Ok(None);
    }
    let payments = sqlx::query_as(
        "SELECT id, order_id, status, amount_cents, currency, provider_charge_id, failure_code
           FROM payments WHERE order_id = $1 ORDER BY created_at",
    )
    .bind(order_id)
    .fetch_all(db)
    .await?;
    Ok(Some(payments))
}
