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

mod findings;
mod ledger;
mod local;
mod refund;

use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use findings::{list as list_findings, resolve as resolve_finding, FindingRow, Kind};

/// An operator's refund of what an open finding names (a charge we cannot match): the
/// charge is refunded (idempotently) and the finding resolved. False if the finding is not
/// open or names no charge.
pub async fn refund_finding(reconciler: &Reconciler, id: Uuid) -> Result<bool, ApiError> {
    let row: Option<(Option<Uuid>, Option<String>)> = sqlx::query_as(
        "SELECT payment_id, provider_charge_id FROM reconcile_findings WHERE id = $1 AND status = 'open'",
    )
    .bind(id)
    .fetch_optional(&reconciler.db)
    .await?;
    let Some((payment_id, Some(charge_id))) = row else {
        return Ok(false);
    };
    refund::refund_charge(&reconciler.db, &reconciler.provider, payment_id, &charge_id).await?;
    Ok(findings::resolve(&reconciler.db, id).await?)
}

use crate::{
    error::ApiError,
    payments::{provider::ProviderClient, settle::SettleRules},
};

/// How long a run may hold the lease; a run that dies leaves it to expire.
const LEASE: Duration = Duration::from_secs(300);

#[derive(Clone)]
pub struct Reconciler {
    pub db: PgPool,
    pub provider: ProviderClient,
    pub rules: SettleRules,
    /// How far before the last run's latest ledger entry the next run starts reading.
    pub overlap: Duration,
}

/// What a run did.
#[derive(Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub id: Uuid,
    pub charges_seen: usize,
    pub findings: usize,
}

impl Reconciler {
    /// Runs once, unless another run holds the lease (`Ok(None)`).
    pub async fn try_execute_task(&self) -> Result<Option<RunSummary>, ApiError> {
        let holder = Uuid::new_v4();
        if !self.take_lease(holder).await? {
            return Ok(None);
        }
        let run = self.run(holder).await;
        self.release_lease(holder).await?;
        run.map(Some)
    }

    async fn run(&self, id: Uuid) -> Result<RunSummary, ApiError> {
        let since = self.ledger_start().await?;
        sqlx::query("INSERT INTO reconcile_runs (id, ledger_since) VALUES ($1, $2)")
            .bind(id)
            .bind(since)
            .execute(&self.db)
            .await?;
        match self.compare(id, since).await {
            Ok(summary) => Ok(summary),
            Err(e) => {
                sqlx::query("UPDATE reconcile_runs SET status = 'failed', error = $2, finished_at = now() WHERE id = $1")
                    .bind(id)
                    .bind(e.to_string())
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
    ) -> Result<RunSummary, ApiError> {
        let (mut seen, mut found, mut until) = (0, 0, since);
        let mut cursor: Option<String> = None;
        loop {
            let page = self.provider.ledger_page(since, cursor.as_deref()).await?;
            for charge in &page.data {
                seen += 1;
                until = until.max(charge.created_at);
                if self.check_charge(id, charge).await? {
                    found += 1;
                }
            }
            match page.next_cursor {
                Some(next) if page.has_more => cursor = Some(next),
                _ => break,
            }
        }
        found += self.settle_stranded(id).await?;
        found += self.check_our_successes(id, since).await?;
        sqlx::query(
            "UPDATE reconcile_runs SET status = 'finished', ledger_until = $2, charges_seen = $3,
                    findings = $4, finished_at = now() WHERE id = $1",
        )
        .bind(id)
        .bind(until)
        .bind(seen as i32)
        .bind(found as i32)
        .execute(&self.db)
        .await?;
        Ok(RunSummary {
            id,
            charges_seen: seen,
            findings: found,
        })
    }

    /// Where this run starts reading: an overlap window before the latest entry any
    /// finished run saw (everything, the first time).
    async fn ledger_start(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, sqlx::Error> {
        let last: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
            "SELECT max(ledger_until) FROM reconcile_runs WHERE status = 'finished'",
        )
        .fetch_one(&self.db)
        .await?;
        let overlap = chrono::Duration::from_std(self.overlap).unwrap_or(chrono::Duration::MAX);
        Ok(last.map(|t| t - overlap))
    }

    async fn take_lease(&self, holder: Uuid) -> Result<bool, sqlx::Error> {
        let taken = sqlx::query(
            "UPDATE reconcile_lease SET holder = $1, lease_until = now() + $2
              WHERE name = 'reconciler' AND lease_until < now()",
        )
        .bind(holder)
        .bind(LEASE)
        .execute(&self.db)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn release_lease(&self, holder: Uuid) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE reconcile_lease SET lease_until = now() WHERE name = 'reconciler' AND holder = $1")
            .bind(holder)
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
