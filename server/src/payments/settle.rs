//! Settling an attempt whose outcome is unknown, when another intent finds it blocking the
//! order (`payments_one_pending_per_order`): a shopper whose first "Pay" ended in a 503
//! must be able to pay with another card without waiting for the first key to come back.
//!
//! Under a lock on the blocking attempt: if the request that owns it may still be running,
//! the answer stays 409. Otherwise the provider is asked what it charged for the attempt
//! (never guessed): a success is applied (the order is paid, or the money is `refund_due`),
//! a decline or no charge at all closes the attempt as failed, and "processing" keeps it
//! pending. The owner's own retry reads its attempt `FOR SHARE` before charging, so it
//! waits for this answer and never charges an attempt closed here.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::{apply, provider::ProviderClient, store};
use crate::error::ApiError;

/// The failure code of an attempt closed because the provider never charged it.
pub const NOT_CHARGED: &str = "not_charged";

/// Settles the order's abandoned pending attempt, if it can be; `PaymentInProgress` while
/// it cannot (its request may be running, or the provider is still processing it).
pub async fn abandoned_attempt(
    db: &PgPool,
    provider: &ProviderClient,
    order_id: Uuid,
    lease: Duration,
) -> Result<(), ApiError> {
    let mut tx = db.begin().await?;
    let Some((payment_id, running)) = store::lock_pending_attempt(&mut tx, order_id, lease).await?
    else {
        return Ok(()); // settled meanwhile
    };
    if running {
        return Err(ApiError::PaymentInProgress);
    }
    let charges = provider.charges_for(payment_id).await?;
    if let Some(charge) = charges.iter().find(|c| c.status == "succeeded") {
        apply::charge_succeeded(&mut tx, payment_id, &charge.facts()).await?;
    } else if charges.iter().any(|c| c.status != "failed") {
        return Err(ApiError::PaymentInProgress);
    } else {
        let declined = charges.last();
        let code = declined
            .and_then(|c| c.failure_code.as_deref())
            .unwrap_or(NOT_CHARGED);
        let charge_id = declined.map(|c| c.id.as_str());
        tracing::info!(payment = %payment_id, code, "closed an abandoned payment attempt");
        apply::charge_failed(&mut tx, payment_id, charge_id, code).await?;
    }
    tx.commit().await?;
    Ok(())
}
