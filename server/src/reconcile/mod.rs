//! The reconciler: the last line of defence. It reads the provider's ledger and compares it
//! with our payments, repairs what can be repaired through the same paths as everything
//! else (apply, settle, idempotent refunds) and flags the rest for an operator. See
//! docs/design.md, "Reconciliation".
//!
//! * One run at a time across all instances: a run starts only by taking the lease row
//!   (`reconcile_lease`), never by a flag in process memory.
//! * Every run and its findings are stored; a finding is recorded once per kind and
//!   subject, so running twice finds nothing new, and every repair is idempotent.
//! * The ledger is read from an overlap window before the last run's latest entry, so a
//!   charge that committed late (after later ones were read) is still seen.

mod failure;
mod findings;
mod hold;
mod ledger;
mod local;
mod refund;

use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use failure::ReconcileError;
pub use findings::{list as list_findings, resolve as resolve_finding, FindingRow, Kind};

/// An operator's refund of what an open finding names: only a charge we could not match
/// (`unknown_reference`, `amount_mismatch`), and never the charge a payment of ours stands
/// on (refunding that would take back the money of a paid order). The charge is refunded
/// (idempotently) and the finding resolved. False if the finding does not qualify.
pub async fn refund_finding(reconciler: &Reconciler, id: Uuid) -> Result<bool, ApiError> {
    let row = sqlx::query!(
        "SELECT f.payment_id, f.provider_charge_id FROM reconcile_findings f
          WHERE f.id = $1 AND f.status = 'open' AND f.kind IN ('unknown_reference', 'amount_mismatch')
            AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.provider_charge_id = f.provider_charge_id)",
        id,
    )
    .fetch_optional(&reconciler.db)
    .await?;
    let Some((payment_id, Some(charge_id))) = row.map(|r| (r.payment_id, r.provider_charge_id))
    else {
        return Ok(false);
    };
    refund::refund_charge(
        &reconciler.db,
        &reconciler.provider,
        payment_id,
        &charge_id,
        None,
    )
    .await?;
    Ok(findings::resolve(&reconciler.db, id).await?)
}

use crate::{error::ApiError, payment_provider::Provider, payments::settle::SettleRules};

/// How long a run holds the lease without renewing it; a run renews it every third of that
/// while it works, and a run that dies leaves it to expire.
const LEASE: Duration = Duration::from_secs(300);
/// The most ledger pages one run reads; the rest waits for the next run.
const MAX_PAGES: usize = 1000;

#[derive(Clone)]
pub struct Reconciler {
    pub db: PgPool,
    pub provider: Provider,
    pub rules: SettleRules,
    /// How far before the last run's latest ledger entry the next run starts reading.
    pub overlap: Duration,
}

/// A run's progress. One item failing (a refund refused, a provider error for one charge)
/// never stops the run: it is counted, and the next run starts early enough to see it again.
#[derive(Default)]
struct Tally {
    seen: usize,
    found: usize,
    until: Option<chrono::DateTime<chrono::Utc>>,
    earliest_failure: Option<chrono::DateTime<chrono::Utc>>,
    errors: Vec<String>,
}

impl Tally {
    fn failed(&mut self, at: Option<chrono::DateTime<chrono::Utc>>, error: String) {
        self.earliest_failure = match (self.earliest_failure, at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.errors.push(error);
    }

    /// Where the next run continues: never past a failed entry, and never past our own
    /// clock (a provider timestamp in the future would otherwise hide everything after it).
    fn watermark(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let until = match self.earliest_failure {
            Some(failed) => self.until.map(|u| u.min(failed)),
            None => self.until,
        };
        until.map(|u| u.min(chrono::Utc::now()))
    }
}

/// What a run did.
#[derive(Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub id: Uuid,
    pub charges_seen: usize,
    pub findings: usize,
}

impl Reconciler {
    /// Runs once, unless another run holds the lease (`Ok(None)`). The lease is renewed
    /// while the run works; a run that loses it (renewal found another holder) stops.
    pub async fn try_execute_task(&self) -> Result<Option<RunSummary>, ReconcileError> {
        let holder = Uuid::new_v4();
        if !self.take_lease(holder).await? {
            return Ok(None);
        }
        let run = tokio::select! {
            run = self.run(holder) => run,
            lost = self.keep_lease(holder) => Err(lost),
        };
        if let Err(e) = self.release_lease(holder).await {
            tracing::warn!(error = %e, "could not release the reconciliation lease; it expires");
        }
        run.map(Some)
    }

    /// Renews the lease every third of its length; returns only when it was lost.
    async fn keep_lease(&self, holder: Uuid) -> ReconcileError {
        loop {
            tokio::time::sleep(LEASE / 3).await;
            let renewed = sqlx::query!(
                "UPDATE reconcile_lease SET lease_until = now() + $2 WHERE name = 'reconciler' AND holder = $1",
                holder,
                LEASE as _,
            )
            .execute(&self.db)
            .await;
            match renewed {
                Ok(r) if r.rows_affected() == 1 => continue,
                Ok(_) => return ReconcileError::LeaseLost,
                Err(e) => return e.into(),
            }
        }
    }

    async fn run(&self, id: Uuid) -> Result<RunSummary, ReconcileError> {
        // Runs that died holding an expired lease are over.
        sqlx::query!(
            "UPDATE reconcile_runs SET status = 'failed', error = 'stopped before it finished', finished_at = now()
              WHERE status = 'running' AND started_at < now() - $1::interval",
            LEASE as _,
        )
        .execute(&self.db)
        .await?;
        let since = self.ledger_start().await?;
        // `as _`: the macros would expect `time`'s type for a timestamptz (a dependency turns
        // on sqlx's `time` feature, which wins over `chrono`); the shop binds chrono's.
        sqlx::query!(
            "INSERT INTO reconcile_runs (id, ledger_since) VALUES ($1, $2)",
            id,
            since as _,
        )
        .execute(&self.db)
        .await?;
        match self.compare(id, since).await {
            Ok(summary) => Ok(summary),
            Err(e) => {
                sqlx::query!(
                    "UPDATE reconcile_runs SET status = 'failed', error = $2, finished_at = now() WHERE id = $1",
                    id,
                    e.to_string(),
                )
                .execute(&self.db)
                .await?;
                Err(e)
            }
        }
    }

    async fn compare(
        &self,
        id: Uuid,
        since: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<RunSummary, ReconcileError> {
        let mut tally = Tally::default();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .provider
                .ledger_page(since, cursor.as_deref())
                .await
                .map_err(|e| ReconcileError::from(e).reading_the_ledger())?;
            for charge in &page.data {
                tally.seen += 1;
                match self.check_charge(id, charge).await {
                    Ok(new) => tally.found += usize::from(new),
                    Err(e) => tally.failed(
                        charge.created_at,
                        format!("charge {}: {}", charge.id, ReconcileError::from(e)),
                    ),
                }
                tally.until = tally.until.max(charge.created_at);
            }
            match page.next_cursor {
                Some(next) if page.has_more && cursor.as_deref() != Some(next.as_str()) => {
                    cursor = Some(next)
                }
                _ => break,
            }
        }
        match self.settle_stranded(id).await {
            Ok(found) => tally.found += found,
            Err(e) => tally.failed(
                None,
                format!("stranded attempts: {}", ReconcileError::from(e)),
            ),
        }
        match self.refund_what_is_due(id).await {
            Ok(found) => tally.found += found,
            Err(e) => tally.failed(None, format!("refunds due: {}", ReconcileError::from(e))),
        }
        match self.check_our_successes(id, since).await {
            Ok((found, unchecked)) => {
                tally.found += found;
                for item in unchecked {
                    tally.failed(Some(item.at), format!("our successes: {}", item.why));
                }
            }
            Err(e) => tally.failed(None, format!("our successes: {}", ReconcileError::from(e))),
        }
        // `tally.watermark()` is chrono's, not the `time` type the macros expect (see `run`).
        sqlx::query!(
            "UPDATE reconcile_runs SET status = 'finished', ledger_until = $2, charges_seen = $3,
                    findings = $4, error = $5, finished_at = now() WHERE id = $1",
            id,
            tally.watermark() as _,
            (tally.seen as i32),
            (tally.found as i32),
            tally.errors.first(),
        )
        .execute(&self.db)
        .await?;
        for error in &tally.errors {
            tracing::warn!(run = %id, error, "reconciliation: an item failed; it is tried again next run");
        }
        Ok(RunSummary {
            id,
            charges_seen: tally.seen,
            findings: tally.found,
        })
    }

    /// Where this run starts reading: an overlap window before the latest entry any
    /// finished run saw (everything, the first time).
    async fn ledger_start(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, sqlx::Error> {
        // Decoded as chrono's type (the macros would pick `time`'s; see `run`).
        let last = sqlx::query_scalar!(
            r#"SELECT max(ledger_until) AS "last: chrono::DateTime<chrono::Utc>"
                 FROM reconcile_runs WHERE status = 'finished'"#,
        )
        .fetch_one(&self.db)
        .await?;
        let overlap = chrono::Duration::from_std(self.overlap).unwrap_or(chrono::Duration::MAX);
        Ok(last.map(|t| t - overlap))
    }

    async fn take_lease(&self, holder: Uuid) -> Result<bool, sqlx::Error> {
        let taken = sqlx::query!(
            "UPDATE reconcile_lease SET holder = $1, lease_until = now() + $2
              WHERE name = 'reconciler' AND lease_until < now()",
            holder,
            LEASE as _,
        )
        .execute(&self.db)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn release_lease(&self, holder: Uuid) -> Result<(), sqlx::Error> {
        sqlx::query!(
            "UPDATE reconcile_lease SET lease_until = now() WHERE name = 'reconciler' AND holder = $1",
            holder,
        )
        .execute(&self.db)
        .await?;
        Ok(())
    }

    /// Runs every `every` until `stop`.
    pub async fn run_worker(self, every: Duration, stop: CancellationToken) {
        while !stop.is_cancelled() {
            match self.try_execute_task().await {
                Ok(Some(run)) => {
                    tracing::info!(run = %run.id, charges = run.charges_seen, findings = run.findings, "reconciliation run finished")
                }
                Ok(None) => tracing::debug!("another reconciliation run is under way"),
                Err(e) => tracing::warn!(error = %e, "reconciliation run failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}
