//! Cancelling an unpaid order (docs/design.md, "Cancelling and expiry"): the shopper's
//! `POST /api/orders/{id}/cancel`, through the idempotency executor, and the expiry that
//! cancels orders nobody paid within `UNPAID_ORDER_EXPIRY_SECS`. Both move the order
//! `pending_payment → cancelled` and nothing else: an order takes no stock and no money
//! until it is paid, so a cancelled one has nothing to give back. An order with a payment
//! attempt in flight is not cancelled (its charge may be going through); should a charge
//! still succeed for a cancelled order, it is `refund_due` (`payments::apply`).

use std::time::Duration;

use axum::{extract::Path, http::StatusCode, response::Response};
use once_axum::{PgTx, Reply};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::store;
use crate::{
    error::ApiError,
    idempotency::{RequestExecutor, RequestKey},
    journal::{self, Actor},
    openapi::IdempotencyKeyHeader,
    session::ExistingShopper,
};

/// Why an order was not cancelled.
#[derive(Debug, PartialEq, Eq)]
pub enum NotCancelled {
    /// No order of this session has that id.
    Unknown,
    /// A payment attempt of the order is in flight.
    PaymentInProgress,
    /// The order is paid (or fulfilled): it is past cancelling.
    Paid,
}

/// Cancel an unpaid order, exactly once per Idempotency-Key
///
/// The order must be waiting for payment, with no payment in flight. Cancelling an order
/// that is cancelled already answers it as it is.
#[utoipa::path(
    post,
    path = "/orders/{id}/cancel",
    operation_id = "cancel_order",
    tag = "orders",
    params(("id" = Uuid, Path, description = "The order to cancel."), IdempotencyKeyHeader),
    responses((status = 200, description = "The order, cancelled.", body = domain::Order)),
    security(("session" = [])),
    extensions(("x-problems" = json!([
        "not-found", "payment-in-progress", "order-not-cancellable", "rate-limited"
    ]))),
)]
pub async fn cancel(
    RequestExecutor(idem): RequestExecutor,
    shopper: ExistingShopper,
    Path(id): Path<String>,
    key: RequestKey,
) -> Result<Response, ApiError> {
    let order_id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound)?;
    let request = key.for_body(
        &shopper.id,
        &cancel_operation(order_id),
        &serde_json::Value::Null,
    );
    Ok(idem
        .execute_in_one_tx(request, move |db| {
            let session_id = shopper.id.clone();
            async move { cancel_in_new_tx(db, &session_id, order_id).await }
        })
        .await)
}

/// The identity of "cancel this order" in the idempotency table.
pub fn cancel_operation(order_id: Uuid) -> String {
    format!("POST /api/orders/{order_id}/cancel")
}

async fn cancel_in_new_tx(
    db: PgPool,
    session_id: &str,
    order_id: Uuid,
) -> Result<(PgTx, Reply), ApiError> {
    let mut tx = db.begin().await?;
    let reply = match cancel_by_shopper(&mut tx, session_id, order_id).await? {
        Ok(()) => {
            let order = store::find(&mut *tx, session_id, order_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            Reply::json(StatusCode::OK, &order)?
        }
        Err(NotCancelled::Unknown) => return Err(ApiError::NotFound),
        // Not stored: the same key may cancel once the payment has settled as failed.
        Err(NotCancelled::PaymentInProgress) => return Err(ApiError::PaymentInProgress),
        Err(NotCancelled::Paid) => ApiError::unprocessable(
            "order-not-cancellable",
            "This order is paid, so it can no longer be cancelled.",
        )
        .reply(),
    };
    Ok((tx, reply))
}

/// Cancels the session's order `order_id` in `tx`, or says why not. An order cancelled
/// already counts as cancelled.
pub async fn cancel_by_shopper(
    tx: &mut PgConnection,
    session_id: &str,
    order_id: Uuid,
) -> Result<Result<(), NotCancelled>, sqlx::Error> {
    // Locked as paying locks it (`payments::store::begin_attempt`): an attempt that began
    // first is seen below, and one that begins later finds the order cancelled.
    let status = sqlx::query_scalar!(
        "SELECT status FROM orders WHERE id = $1 AND session_id = $2 FOR NO KEY UPDATE",
        order_id,
        session_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    match status.as_deref() {
        None => Ok(Err(NotCancelled::Unknown)),
        Some("cancelled") => Ok(Ok(())),
        Some("pending_payment") if payment_in_flight(tx, order_id).await? => {
            Ok(Err(NotCancelled::PaymentInProgress))
        }
        Some("pending_payment") => {
            sqlx::query!(
                "UPDATE orders SET status = 'cancelled', updated_at = now() WHERE id = $1",
                order_id
            )
            .execute(&mut *tx)
            .await?;
            Ok(Ok(()))
        }
        Some(_) => Ok(Err(NotCancelled::Paid)),
    }
}

async fn payment_in_flight(tx: &mut PgConnection, order_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM payments WHERE order_id = $1 AND status = 'pending') AS "in_flight!""#,
        order_id
    )
    .fetch_one(tx)
    .await
}

/// Cancels the orders nobody paid within `expiry` (without a payment in flight), the
/// oldest first, a batch at a time; each is written in the journal by the `expiry`. Safe
/// on several instances at once: a row another instance holds is skipped, and the status
/// condition makes a second cancel a no-op. How many were cancelled.
pub async fn expire_unpaid(db: &PgPool, expiry: Duration) -> Result<u64, sqlx::Error> {
    const BATCH: i64 = 500;
    let mut cancelled = 0;
    loop {
        let mut tx = db.begin().await?;
        journal::acting_as(&mut tx, Actor::Expiry).await?;
        // First the orders are locked, as paying locks them; then, in a statement that sees
        // every attempt committed before the locks were taken, those still without a payment
        // in flight are cancelled. An attempt that begins later waits, then finds them
        // cancelled.
        let due = sqlx::query_scalar!(
            "SELECT o.id FROM orders o
              WHERE o.status = 'pending_payment'
                AND o.created_at < now() - $1::bigint * interval '1 millisecond'
                AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'pending')
              ORDER BY o.created_at
              LIMIT $2
                FOR NO KEY UPDATE OF o SKIP LOCKED",
            expiry.as_millis() as i64,
            BATCH,
        )
        .fetch_all(&mut *tx)
        .await?;
        let done = sqlx::query!(
            "UPDATE orders o SET status = 'cancelled', updated_at = now()
              WHERE o.id = ANY($1) AND o.status = 'pending_payment'
                AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'pending')",
            &due,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        cancelled += done;
        if (due.len() as i64) < BATCH {
            return Ok(cancelled);
        }
    }
}
