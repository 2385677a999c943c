//! Settling an attempt whose outcome is unknown, when another intent finds it blocking the
//! order (`payments_one_pending_per_order`): a shopper whose first "Pay" ended in a 503
//! must be able to pay with another card once the first is known not to have charged.
//!
//! Seeing no charge at the provider is proof only if no call to charge the attempt can
//! still be under way. So an attempt is closed only when
//! * the request that owns it is not running (its key is not leased, nor was lately), and
//! * no charge call for it started within the grace period (`charge_requested_at`;
//!   the configuration keeps the grace at least twice the provider call's timeout), and
//! * the provider reports no charge, or only declines, for it (never guessed).
//!
//! The close is one conditional UPDATE that re-checks "pending and quiet" on the row's
//! latest version, and every charge call first stamps `charge_requested_at` on a pending
//! attempt: a new attempt's first call in the commit that records it (`store::begin_attempt`,
//! stamped when the row is written), every later call with `store::stamp_charge_call`.
//! Whichever comes second sees the first (a new attempt cannot be quiet before the grace
//! has passed since it was written), so an attempt is never both closed and charged. A success the provider reports is applied
//! like a callback (the order is paid, or the money is `refund_due`); "processing" keeps
//! the attempt pending. No lock is held while the provider is asked.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::{apply, store};
use crate::error::ApiError;
use crate::payment_provider::{AttemptRef, Provider, FAILED, SUCCEEDED};

/// The failure code of an attempt closed because the provider never charged it.
pub const NOT_CHARGED: &str = "not_charged";

/// How long an attempt waiting for the shopper's bank (3-D Secure) is left to the shopper
/// before it counts as abandoned: a bank's step takes minutes (a code by text message, an
/// app to open), far longer than the grace a charge call needs (docs/payments.md, "3-D
/// Secure").
pub const BANK_STEP_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The timings that decide whether a blocking attempt may be settled.
#[derive(Clone, Copy, Debug)]
pub struct SettleRules {
    pub lease: Duration,
    pub grace: Duration,
}

impl SettleRules {
    /// How long an attempt must be quiet: the grace, or the bank's step when it waits for
    /// one (never shorter than the grace).
    pub fn quiet_for(&self) -> (Duration, Duration) {
        (self.grace, self.grace.max(BANK_STEP_WINDOW))
    }
}

/// Settles the order's abandoned pending attempt, if it can be; `PaymentInProgress` while
/// it cannot (its request may be running, a charge call may be under way, or the provider
/// is still processing it).
pub async fn abandoned_attempt(
    db: &PgPool,
    provider: &Provider,
    order_id: Uuid,
    rules: SettleRules,
) -> Result<(), ApiError> {
    let Some(blocker) = store::blocker(db, order_id, rules.lease, rules.quiet_for()).await? else {
        return Ok(()); // settled meanwhile
    };
    if blocker.running || !blocker.quiet {
        return Err(ApiError::PaymentInProgress);
    }
    let attempt = AttemptRef {
        payment_id: blocker.id,
        intent_id: blocker.intent_id.as_deref(),
    };
    let charges = provider.final_charges(&attempt).await?;
    let mut tx = db.begin().await?;
    if let Some(charge) = charges.iter().find(|c| c.status == SUCCEEDED) {
        apply::charge_succeeded(&mut tx, blocker.id, &apply::ChargeFacts::of(charge)).await?;
    } else if charges.iter().any(|c| c.status != FAILED) {
        return Err(ApiError::PaymentInProgress);
    } else {
        let code = charges
            .last()
            .and_then(|c| c.failure_code.as_deref())
            .unwrap_or(NOT_CHARGED);
        if !store::close_never_charged(&mut tx, blocker.id, rules.grace, code).await? {
            return Err(ApiError::PaymentInProgress);
        }
        tracing::info!(payment = %blocker.id, code, "closed an abandoned payment attempt");
    }
    tx.commit().await?;
    Ok(())
}
