//! Refunding money we must not keep: a second charge, or a success the order could not
//! take. The provider is asked under a key derived from the charge, so asking twice (two
//! runs, two reconcilers, a crash between the call and our record) refunds once.

use sqlx::PgPool;
use uuid::Uuid;

use super::findings::{self, Finding};
use crate::{
    error::ApiError,
    journal::{self, Actor},
    payment_provider::Provider,
};

/// Refunds `charge_id` (taken for `payment_id`, if it names one of ours) and records it,
/// with `finding` (of run `run_id`) in the same transaction; a payment that was
/// `refund_due` becomes `refunded`. Doing it again changes nothing. True if the finding
/// is new.
pub async fn refund_charge(
    db: &PgPool,
    provider: &Provider,
    payment_id: Option<Uuid>,
    charge_id: &str,
    finding: Option<(Uuid, Finding<'_>)>,
) -> Result<bool, ApiError> {
    let refund_id = provider.refund(charge_id).await?;
    let mut tx = db.begin().await?;
    journal::acting_as(&mut tx, Actor::Reconciler).await?;
    let new = match finding {
        Some((run_id, finding)) => findings::record(&mut *tx, run_id, finding).await?,
        None => false,
    };
    sqlx::query!(
        "INSERT INTO provider_refunds (provider_charge_id, payment_id, provider_refund_id)
         VALUES ($1, $2, $3) ON CONFLICT ON CONSTRAINT provider_refunds_pkey DO NOTHING",
        charge_id,
        payment_id,
        refund_id,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE payments SET status = 'refunded', updated_at = now()
          WHERE id = $1 AND status = 'refund_due' AND provider_charge_id = $2",
        payment_id,
        charge_id,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(new)
}

/// Whether we refunded `charge_id` already.
pub async fn refunded(db: &PgPool, charge_id: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM provider_refunds WHERE provider_charge_id = $1) AS "refunded!""#,
        charge_id,
    )
    .fetch_one(db)
    .await
}
