//! Checking one charge of the provider's ledger against our payment attempt.
//!
//! | provider | ours | what the run does |
//! |---|---|---|
//! | succeeded | no attempt with that reference | `unknown_reference`, flagged |
//! | succeeded | amount or currency differ | `amount_mismatch`, flagged |
//! | succeeded | pending or failed, order payable | applied like a callback: `missed_success` |
//! | succeeded | pending or failed, order paid by another attempt | refunded: `refund_due` |
//! | succeeded | `refund_due` with this charge | refunded: `refund_due` |
//! | succeeded | succeeded with another charge | refunded: `double_charge` |
//! | succeeded | succeeded with this charge, or refunded | nothing |
//! | anything else | | nothing (pending attempts are the local check's) |

use uuid::Uuid;

use super::{
    findings::{self, Finding, Kind},
    refund, Reconciler,
};
use crate::{
    error::ApiError,
    payments::{
        apply::{self, Applied, ApplyError},
        provider::Charge,
    },
};

#[derive(sqlx::FromRow)]
struct Ours {
    status: String,
    amount_cents: i64,
    currency: String,
    provider_charge_id: Option<String>,
}

impl Reconciler {
    /// Checks one ledger charge; true if it produced a new finding.
    pub(super) async fn check_charge(
        &self,
        run_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        if charge.status != "succeeded" || refund::refunded(&self.db, &charge.id).await? {
            return Ok(false);
        }
        let payment_id = Uuid::parse_str(&charge.reference).ok();
        let ours: Option<Ours> = match payment_id {
            Some(id) => sqlx::query_as(
                "SELECT status, amount_cents, currency, provider_charge_id FROM payments WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(&self.db)
            .await?,
            None => None,
        };
        let (Some(payment_id), Some(ours)) = (payment_id, ours) else {
            let detail = format!(
                "charge {} names reference {:?}, which is no attempt of ours",
                charge.id, charge.reference
            );
            return self
                .found(
                    run_id,
                    Kind::UnknownReference,
                    &charge.id,
                    None,
                    charge,
                    detail,
                )
                .await;
        };
        if ours.amount_cents != charge.amount_cents || ours.currency != charge.currency {
            let detail = format!(
                "charged {} {}, the attempt is for {} {}",
                charge.amount_cents, charge.currency, ours.amount_cents, ours.currency
            );
            return self
                .found(
                    run_id,
                    Kind::AmountMismatch,
                    &charge.id,
                    Some(payment_id),
                    charge,
                    detail,
                )
                .await;
        }
        let own_charge = ours.provider_charge_id.as_deref() == Some(charge.id.as_str());
        match ours.status.as_str() {
            "succeeded" if own_charge => Ok(false),
            "refunded" => Ok(false),
            "succeeded" => {
                refund::refund_charge(&self.db, &self.provider, Some(payment_id), &charge.id)
                    .await?;
                let detail = format!("a second charge {} for a paid attempt: refunded", charge.id);
                self.found(
                    run_id,
                    Kind::DoubleCharge,
                    &charge.id,
                    Some(payment_id),
                    charge,
                    detail,
                )
                .await
            }
            "refund_due" if own_charge => self.refund_due(run_id, payment_id, charge).await,
            _ => self.apply_missed(run_id, payment_id, charge).await,
        }
    }

    /// A success we never applied: applied now, through the same path as a callback.
    async fn apply_missed(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        let mut tx = self.db.begin().await?;
        let applied = match apply::charge_succeeded(&mut tx, payment_id, &charge.facts()).await {
            Ok(applied) => applied,
            Err(ApplyError::AmountMismatch { .. }) => {
                let detail = format!("charge {} does not match its order's total", charge.id);
                return self
                    .found(
                        run_id,
                        Kind::AmountMismatch,
                        &charge.id,
                        Some(payment_id),
                        charge,
                        detail,
                    )
                    .await;
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        match applied {
            Applied::Paid => {
                let detail = format!(
                    "charge {} succeeded but was never applied: the order is paid now",
                    charge.id
                );
                self.found(
                    run_id,
                    Kind::MissedSuccess,
                    &charge.id,
                    Some(payment_id),
                    charge,
                    detail,
                )
                .await
            }
            Applied::RefundDue => self.refund_due(run_id, payment_id, charge).await,
            Applied::AlreadyApplied => Ok(false),
        }
    }

    async fn refund_due(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        refund::refund_charge(&self.db, &self.provider, Some(payment_id), &charge.id).await?;
        let detail = format!(
            "charge {} came for an order that could not take it: refunded",
            charge.id
        );
        self.found(
            run_id,
            Kind::RefundDue,
            &charge.id,
            Some(payment_id),
            charge,
            detail,
        )
        .await
    }

    async fn found(
        &self,
        run_id: Uuid,
        kind: Kind,
        subject: &str,
        payment_id: Option<Uuid>,
        charge: &Charge,
        detail: String,
    ) -> Result<bool, ApiError> {
        let finding = Finding {
            kind,
            subject,
            payment_id,
            charge_id: Some(&charge.id),
            detail,
        };
        Ok(findings::record(&self.db, run_id, finding).await?)
    }
}
