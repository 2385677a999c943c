//! The shop's own retention, beside the key table's (`once_axum::purge`): the keys of "Add
//! to cart" forms and the order journal's entries live as long as Idempotency-Keys do, the
//! console's samples for two days, and the login throttle forgets addresses quiet for a day.
//! Orders nobody paid in time are cancelled on the same round; finished orders forget their
//! shopper after `PERSONAL_DATA_RETENTION_DAYS`, and carts their typed details after the keys'
//! retention (docs/operations.md, "Personal data").

use std::time::Duration;

use sqlx::PgPool;

use crate::{cart, checkout_details, journal, operator, orders};

/// How long each kind of record is kept.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// The keys' window: cart adds, the journal, typed checkout details.
    pub keys: Duration,
    /// Unpaid orders are cancelled after this.
    pub unpaid_expiry: Duration,
    /// Finished orders keep their shopper's details this long.
    pub personal_data: Duration,
}

/// Forgets what is past retention every `every`, until the task is dropped. Safe on
/// several instances at once: each DELETE is independent and idempotent.
pub async fn run_worker(db: PgPool, keep: Retention, every: Duration) {
    let Retention {
        keys: retention,
        unpaid_expiry,
        personal_data,
    } = keep;
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = orders::personal_data::forget_finished(&db, personal_data).await {
            tracing::warn!(error = %e, "forgetting finished orders' shoppers failed; will retry");
        }
        if let Err(e) = checkout_details::forget_old(&db, retention).await {
            tracing::warn!(error = %e, "forgetting old checkout details failed; will retry");
        }
        if let Err(e) = orders::cancel::expire_unpaid(&db, unpaid_expiry).await {
            tracing::warn!(error = %e, "cancelling unpaid orders failed; will retry");
        }
        if let Err(e) = orders::store::forget_client_orders(&db).await {
            tracing::warn!(error = %e, "forgetting last hour's client order counts failed; will retry");
        }
        if let Err(e) = cart::forget_old_adds(&db, retention).await {
            tracing::warn!(error = %e, "forgetting old cart adds failed; will retry");
        }
        if let Err(e) = journal::forget_old(&db, retention).await {
            tracing::warn!(error = %e, "forgetting old journal entries failed; will retry");
        }
        if let Err(e) = operator::samples::forget_old(&db).await {
            tracing::warn!(error = %e, "forgetting old console samples failed; will retry");
        }
        if let Err(e) = operator::forget_unused_browsers(&db).await {
            tracing::warn!(error = %e, "forgetting unused operator browsers failed; will retry");
        }
        if let Err(e) = operator::throttle::forget_quiet(&db).await {
            tracing::warn!(error = %e, "forgetting quiet login throttle rows failed; will retry");
        }
    }
}
