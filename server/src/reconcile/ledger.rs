//! Checking one entry of the provider's ledger against our payment attempt. Decided on the
//! attempt's row under its lock (apply takes it), or on a fresh read for refunds, which the
//! provider makes idempotent.
//!
//! | provider | ours | what the run does |
//! |---|---|---|
//! | succeeded | no attempt with that reference | `unknown_reference`, flagged |
//! | succeeded | the charge our success stands on, for another amount or currency | `amount_mismatch`, flagged, and the order held: not shipped while the finding is open |
//! | succeeded | amount or currency differ | `amount_mismatch`, flagged |
//! | succeeded | succeeded / refund_due / refunded with another charge | refunded: `double_charge` |
//! | succeeded | `refund_due` with this charge | refunded: `refund_due` |
//! | succeeded | pending or failed, order payable | applied like a callback: `missed_success` |
//! | succeeded | pending or failed, order paid by another attempt | refunded: `refund_due` |
//! | succeeded | succeeded or refunded with this charge | nothing |
//! | anything else | | nothing (pending attempts are the local check's) |

use uuid::Uuid;

use super::{
    findings::{self, Finding, Kind},
    refund, Reconciler,
};
use crate::{
    error::ApiError,
    journal::{self, Actor},
    payment_provider::{Charge, SUCCEEDED},
    payments::apply::{self, Applied, ApplyError, ChargeFacts},
};

struct Ours {
    status: String,
    amount_cents: i64,
    currency: String,
    provider_charge_id: Option<String>,
}

impl Reconciler {
    /// Checks one ledger entry; true if it produced a new finding.
    pub(super) async fn check_charge(
        &self,
        run_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        if charge.status != SUCCEEDED || refund::refunded(&self.db, &charge.id).await? {
            return Ok(false);
        }
        let payment_id = Uuid::parse_str(&charge.reference).ok();
        let ours = match payment_id {
            Some(id) => self.ours(id).await?,
            None => None,
        };
        let (Some(payment_id), Some(ours)) = (payment_id, ours) else {
            let detail = format!(
                "charge {} names reference {:?}, which is no attempt of ours",
                charge.id, charge.reference
            );
            return self
                .flag(run_id, Kind::UnknownReference, None, charge, detail)
                .await;
        };
        if ours.amount_cents != charge.amount_cents || ours.currency != charge.currency {
            let detail = format!(
                "charged {} {}, the attempt is for {} {}",
                charge.amount_cents, charge.currency, ours.amount_cents, ours.currency
            );
            let paid_by_it = ours.status == "succeeded"
                && ours.provider_charge_id.as_deref() == Some(charge.id.as_str());
            if paid_by_it {
                let finding = about(charge, Kind::AmountMismatch, Some(payment_id), detail);
                return Ok(self.hold(run_id, payment_id, finding).await?);
            }
            return self
                .flag(
                    run_id,
                    Kind::AmountMismatch,
                    Some(payment_id),
                    charge,
                    detail,
                )
                .await;
        }
        self.settle_charge(run_id, payment_id, &ours, charge).await
    }

    async fn ours(&self, payment_id: Uuid) -> Result<Option<Ours>, sqlx::Error> {
        sqlx::query_as!(
            Ours,
            "SELECT status, amount_cents, currency, provider_charge_id FROM payments WHERE id = $1",
            payment_id,
        )
        .fetch_optional(&self.db)
        .await
    }

    async fn settle_charge(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        ours: &Ours,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        let own_charge = ours.provider_charge_id.as_deref() == Some(charge.id.as_str());
        let settled = matches!(
            ours.status.as_str(),
            "succeeded" | "refund_due" | "refunded"
        );
        match ours.status.as_str() {
            _ if settled && ours.provider_charge_id.is_none() => {
                let detail = format!(
                    "charge {} for a settled attempt that records no charge",
                    charge.id
                );
                self.flag(
                    run_id,
                    Kind::AmountMismatch,
                    Some(payment_id),
                    charge,
                    detail,
                )
                .await
            }
            _ if settled && !own_charge => self.refund_double(run_id, payment_id, charge).await,
            "refund_due" => self.refund_due(run_id, payment_id, charge).await,
            "succeeded" | "refunded" => Ok(false),
            _ => self.apply_missed(run_id, payment_id, charge).await,
        }
    }

    /// A success we never applied: applied now, through the same path as a callback, with
    /// its finding in the same transaction.
    async fn apply_missed(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        let mut tx = self.db.begin().await?;
        journal::acting_as(&mut tx, Actor::Reconciler).await?;
        let applied =
            match apply::charge_succeeded(&mut tx, payment_id, &ChargeFacts::of(charge)).await {
                Ok(applied) => applied,
                Err(ApplyError::AmountMismatch { .. }) => {
                    let detail = format!("charge {} does not match its order's total", charge.id);
                    return self
                        .flag(
                            run_id,
                            Kind::AmountMismatch,
                            Some(payment_id),
                            charge,
                            detail,
                        )
                        .await;
                }
                Err(e) => return Err(e.into()),
            };
        match applied {
            Applied::Paid => {
                let detail = format!(
                    "charge {} succeeded but was never applied: the order is paid now",
                    charge.id
                );
                let finding = about(charge, Kind::MissedSuccess, Some(payment_id), detail);
                let new = findings::record(&mut *tx, run_id, finding).await?;
                tx.commit().await?;
                Ok(new)
            }
            Applied::RefundDue => {
                tx.commit().await?;
                self.refund_due(run_id, payment_id, charge).await
            }
            // Settled meanwhile (a callback came first): decide again on what it is now.
            Applied::AlreadyApplied => {
                tx.commit().await?;
                match self.ours(payment_id).await? {
                    Some(now) if now.provider_charge_id.as_deref() != Some(charge.id.as_str()) => {
                        self.refund_double(run_id, payment_id, charge).await
                    }
                    _ => Ok(false),
                }
            }
        }
    }

    async fn refund_double(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        let detail = format!(
            "a second charge {} for a settled attempt: refunded",
            charge.id
        );
        self.refund(run_id, payment_id, charge, Kind::DoubleCharge, detail)
            .await
    }

    async fn refund_due(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
    ) -> Result<bool, ApiError> {
        let detail = format!(
            "charge {} came for an order that could not take it: refunded",
            charge.id
        );
        self.refund(run_id, payment_id, charge, Kind::RefundDue, detail)
            .await
    }

    /// Refunds `charge`, recording the finding `kind` with the refund.
    async fn refund(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        charge: &Charge,
        kind: Kind,
        detail: String,
    ) -> Result<bool, ApiError> {
        let finding = about(charge, kind, Some(payment_id), detail);
        refund::refund_charge(
            &self.db,
            &self.provider,
            Some(payment_id),
            &charge.id,
            Some((run_id, finding)),
        )
        .await
    }

    async fn flag(
        &self,
        run_id: Uuid,
        kind: Kind,
        payment_id: Option<Uuid>,
        charge: &Charge,
        detail: String,
    ) -> Result<bool, ApiError> {
        let finding = about(charge, kind, payment_id, detail);
        Ok(findings::record(&self.db, run_id, finding).await?)
    }
}

/// A finding about a ledger charge: its subject is the charge.
fn about(charge: &Charge, kind: Kind, payment_id: Option<Uuid>, detail: String) -> Finding<'_> {
    Finding {
        kind,
        subject: &charge.id,
        payment_id,
        charge_id: Some(&charge.id),
        detail,
    }
}
