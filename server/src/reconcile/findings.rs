//! Findings: what a run found, recorded once per (kind, subject) by
//! `reconcile_findings_once`, so a second run that sees the same thing adds nothing.

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// What a finding is about, and whether it was repaired or waits for an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The provider charged, we never heard: applied like a callback (the order is paid).
    MissedSuccess,
    /// A second charge for an attempt that already succeeded: refunded.
    DoubleCharge,
    /// A success the order could no longer take (paid by another attempt): refunded.
    RefundDue,
    /// Pending here, never charged there: closed as failed; the order stays payable.
    StrandedPending,
    /// Amounts or currencies disagree: flagged, never repaired automatically.
    AmountMismatch,
    /// A provider charge naming no attempt of ours: flagged.
    UnknownReference,
    /// Succeeded here, unknown to the provider: flagged.
    UnknownToProvider,
}

impl Kind {
    /// The kinds that hold the order a success of ours paid, while open (`hold`): the
    /// provider lists its charge for another amount, or does not know it. Fulfillment reads
    /// the same list (`fulfillment::held_orders`).
    pub const HOLDING: [&'static str; 2] = ["amount_mismatch", "unknown_to_provider"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissedSuccess => "missed_success",
            Self::DoubleCharge => "double_charge",
            Self::RefundDue => "refund_due",
            Self::StrandedPending => "stranded_pending",
            Self::AmountMismatch => "amount_mismatch",
            Self::UnknownReference => "unknown_reference",
            Self::UnknownToProvider => "unknown_to_provider",
        }
    }

    /// Repaired by the run itself, or left open for an operator.
    fn status(self) -> &'static str {
        match self {
            Self::AmountMismatch | Self::UnknownReference | Self::UnknownToProvider => "open",
            _ => "repaired",
        }
    }
}

pub struct Finding<'a> {
    pub kind: Kind,
    /// What it is about: a provider charge id, or a payment id.
    pub subject: &'a str,
    pub payment_id: Option<Uuid>,
    pub charge_id: Option<&'a str>,
    pub detail: String,
}

/// Records a finding of run `run_id`; false if it was recorded before. Repairs record their
/// finding in their own transaction, so a repair is never left without its record.
pub async fn record(
    db: impl sqlx::PgExecutor<'_>,
    run_id: Uuid,
    finding: Finding<'_>,
) -> Result<bool, sqlx::Error> {
    let kind = finding.kind;
    let inserted = sqlx::query!(
        "INSERT INTO reconcile_findings (id, run_id, kind, subject, payment_id, provider_charge_id, status, detail)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT ON CONSTRAINT reconcile_findings_once DO NOTHING",
        Uuid::new_v4(),
        run_id,
        kind.as_str(),
        finding.subject,
        finding.payment_id,
        finding.charge_id,
        kind.status(),
        finding.detail,
    )
    .execute(db)
    .await?
    .rows_affected();
    if inserted == 1 {
        tracing::warn!(kind = kind.as_str(), subject = finding.subject, detail = %finding.detail, "reconciliation finding");
    }
    Ok(inserted == 1)
}

#[derive(Debug, Serialize)]
pub struct FindingRow {
    pub id: Uuid,
    pub kind: String,
    pub subject: String,
    pub status: String,
    pub detail: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

pub async fn list(db: &PgPool) -> Result<Vec<FindingRow>, sqlx::Error> {
    // `created_at` is decoded as chrono's type; the macros alone would pick `time`'s (sqlx's
    // `time` feature is on through a dependency and wins over `chrono`).
    sqlx::query_as!(
        FindingRow,
        r#"SELECT id, kind, subject, status, detail,
                  created_at AS "created_at: chrono::DateTime<chrono::Utc>"
             FROM reconcile_findings ORDER BY created_at DESC LIMIT 200"#,
    )
    .fetch_all(db)
    .await
}

/// An operator marks an open finding resolved. An order the finding held (`hold`) is
/// released in the same transaction: announced paid again, so fulfillment ships it now (its
/// first `order.paid` was consumed as `held`).
pub async fn resolve(db: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    // The order first, as the hold takes it before recording its finding: the two never
    // wait for each other in a cycle.
    sqlx::query!(
        "SELECT o.id FROM orders o
           JOIN payments p ON p.order_id = o.id
           JOIN reconcile_findings f ON f.payment_id = p.id
          WHERE f.id = $1 FOR NO KEY UPDATE OF o",
        id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let resolved = sqlx::query!(
        "UPDATE reconcile_findings SET status = 'resolved', resolved_at = now()
          WHERE id = $1 AND status = 'open' RETURNING kind, payment_id, provider_charge_id",
        id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(finding) = resolved else {
        return Ok(false);
    };
    if let (true, Some(payment_id), Some(charge_id)) = (
        Kind::HOLDING.contains(&finding.kind.as_str()),
        finding.payment_id,
        finding.provider_charge_id,
    ) {
        release_held_order(&mut tx, payment_id, &charge_id).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// `order.paid` again for the order that payment `payment_id` paid with `charge_id`, if it
/// is still paid and not fulfilled: what a hold kept from shipping.
async fn release_held_order(
    tx: &mut sqlx::PgConnection,
    payment_id: Uuid,
    charge_id: &str,
) -> Result<(), sqlx::Error> {
    let held = sqlx::query_scalar!(
        "SELECT o.id FROM orders o JOIN payments p ON p.order_id = o.id
          WHERE p.id = $1 AND p.status = 'succeeded' AND p.provider_charge_id = $2
            AND o.status = 'paid'
            AND NOT EXISTS (SELECT 1 FROM fulfillments f WHERE f.order_id = o.id)
            FOR NO KEY UPDATE OF o",
        payment_id,
        charge_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order_id) = held else {
        return Ok(());
    };
    tracing::info!(order = %order_id, payment = %payment_id, "a held order is released by the operator");
    let payload = serde_json::json!({
        "order_id": order_id,
        "payment_id": payment_id,
        "charge_id": charge_id,
        "released": true,
    });
    once_events::outbox::record(tx, "order", order_id, "order.paid", payload).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holding_kinds_are_named_as_stored() {
        assert_eq!(
            Kind::HOLDING,
            [
                Kind::AmountMismatch.as_str(),
                Kind::UnknownToProvider.as_str()
            ]
        );
    }
}
