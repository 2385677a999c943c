//! Checking our side against the provider: attempts stranded in `pending`, and successes
//! the provider does not know.

use uuid::Uuid;

use super::{
    findings::{self, Finding, Kind},
    refund, Reconciler,
};
use crate::{error::ApiError, payments::settle};

impl Reconciler {
    /// Pending attempts quiet for longer than the settle grace are settled by asking the
    /// provider (`payments::settle`, the same fenced code a second intent uses): a charge
    /// it reports is applied, no charge closes the attempt as failed, so its order is
    /// payable again; a late retry of the attempt cannot charge on it any more.
    pub(super) async fn settle_stranded(&self, run_id: Uuid) -> Result<usize, ApiError> {
        // The millisecond counts are bigint, as bound (Postgres alone would infer a float).
        // An attempt waiting for the shopper's bank is left to them for longer.
        let (grace, bank_step) = self.rules.quiet_for();
        let stranded = sqlx::query!(
            "SELECT id, order_id FROM payments
              WHERE status = 'pending'
                AND coalesce(charge_requested_at, created_at) < now()
                  - CASE WHEN needs_authentication THEN $2::bigint ELSE $1::bigint END
                    * interval '1 millisecond'
              ORDER BY created_at LIMIT 200",
            (grace.as_millis() as i64),
            (bank_step.as_millis() as i64),
        )
        .fetch_all(&self.db)
        .await?;
        let mut found = 0;
        for row in stranded {
            let (payment_id, order_id) = (row.id, row.order_id);
            match settle::abandoned_attempt(&self.db, &self.provider, order_id, self.rules).await {
                Ok(()) => {}
                Err(ApiError::PaymentInProgress) => continue, // still running or processing
                Err(e) => {
                    // One attempt that cannot be settled (its charge disagrees with its
                    // order, say) must not stop the others: the ledger check flags it.
                    tracing::warn!(payment = %payment_id, error = %e, "a stranded attempt could not be settled");
                    continue;
                }
            }
            let settled = sqlx::query!(
                "SELECT status, failure_code FROM payments WHERE id = $1",
                payment_id,
            )
            .fetch_one(&self.db)
            .await?;
            let (status, code) = (settled.status, settled.failure_code);
            let (kind, detail) = match status.as_str() {
                "failed" => (
                    Kind::StrandedPending,
                    format!(
                        "pending with no charge at the provider: closed ({})",
                        code.unwrap_or_default()
                    ),
                ),
                "succeeded" => (
                    Kind::MissedSuccess,
                    "pending, but the provider had charged it: the order is paid now".to_owned(),
                ),
                "refund_due" => (
                    Kind::RefundDue,
                    "pending, charged, for an order paid meanwhile: refund due".to_owned(),
                ),
                _ => continue,
            };
            let subject = payment_id.to_string();
            let finding = Finding {
                kind,
                subject: &subject,
                payment_id: Some(payment_id),
                charge_id: None,
                detail,
            };
            if findings::record(&self.db, run_id, finding).await? {
                found += 1;
            }
        }
        Ok(found)
    }

    /// Every attempt whose money is owed back (`refund_due`) is refunded, whether or not the
    /// ledger window shows its charge again.
    pub(super) async fn refund_what_is_due(&self, run_id: Uuid) -> Result<usize, ApiError> {
        let due = sqlx::query!(
            r#"SELECT id, provider_charge_id AS "provider_charge_id!" FROM payments
              WHERE status = 'refund_due' AND provider_charge_id IS NOT NULL
              ORDER BY updated_at LIMIT 200"#,
        )
        .fetch_all(&self.db)
        .await?;
        let mut found = 0;
        for row in due {
            let (payment_id, charge_id) = (row.id, row.provider_charge_id);
            let detail =
                format!("charge {charge_id} came for an order that could not take it: refunded");
            let finding = Finding {
                kind: Kind::RefundDue,
                subject: &charge_id,
                payment_id: Some(payment_id),
                charge_id: Some(&charge_id),
                detail,
            };
            if refund::refund_charge(
                &self.db,
                &self.provider,
                Some(payment_id),
                &charge_id,
                Some((run_id, finding)),
            )
            .await?
            {
                found += 1;
            }
        }
        Ok(found)
    }

    /// Successes of ours, settled since `since`, whose charge the provider does not know:
    /// flagged, never repaired, and their orders held (`hold`). One the provider cannot be
    /// asked about is returned with its time, for the run's watermark to stay before it; the
    /// others are still checked.
    pub(super) async fn check_our_successes(
        &self,
        run_id: Uuid,
        since: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<(usize, Vec<Unchecked>), ApiError> {
        // `since as _`: chrono's type, where the macros would expect `time`'s (sqlx's `time`
        // feature is on through a dependency and wins over `chrono`).
        let ours = sqlx::query!(
            r#"SELECT id, provider_charge_id AS "provider_charge_id!",
                      updated_at AS "updated_at: chrono::DateTime<chrono::Utc>" FROM payments
              WHERE status = 'succeeded' AND provider_charge_id IS NOT NULL
                AND ($1::timestamptz IS NULL OR updated_at >= $1)
              ORDER BY updated_at LIMIT 1000"#,
            since as _,
        )
        .fetch_all(&self.db)
        .await?;
        let (mut found, mut unchecked) = (0, Vec::new());
        for row in ours {
            let (payment_id, charge_id) = (row.id, row.provider_charge_id);
            match self.provider.charge_exists(&charge_id).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    unchecked.push(Unchecked {
                        at: row.updated_at,
                        why: format!("payment {payment_id}: {e}"),
                    });
                    continue;
                }
            }
            let detail =
                format!("succeeded here with charge {charge_id}, which the provider does not know");
            let finding = Finding {
                kind: Kind::UnknownToProvider,
                subject: &charge_id,
                payment_id: Some(payment_id),
                charge_id: Some(&charge_id),
                detail,
            };
            if self.hold(run_id, payment_id, finding).await? {
                found += 1;
            }
        }
        Ok((found, unchecked))
    }
}

/// A success of ours the provider could not be asked about in this run.
pub(super) struct Unchecked {
    pub at: chrono::DateTime<chrono::Utc>,
    pub why: String,
}
