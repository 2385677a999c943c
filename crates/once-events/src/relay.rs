//! The relay: moves outbox events to the bus, a batch at a time. Any number of relays may
//! run: each claims a batch of unpublished rows with `FOR UPDATE SKIP LOCKED`, so two relays
//! never hold the same row, publishes the batch (one statement on the PostgreSQL bus,
//! pipelined publishes on JetStream, answered only once every message is stored), and marks
//! it published with one statement in the claiming transaction. A relay that dies after
//! publishing and before committing leaves the rows unpublished: they are published again,
//! and the bus (message id = event id) and the consumers ([`crate::consume_once`]) absorb the
//! repeat. Progress is the `published_at` column, never "the highest id seen": ids (and
//! sequence values) commit out of order. Under load a relay goes from batch to batch
//! without waiting; only an empty outbox makes it wait for a notification (or the poll).

use std::{future::Future, sync::Arc, time::Duration};

use sqlx::{postgres::PgQueryResult, PgPool};
use tokio_util::sync::CancellationToken;

use crate::{
    bus::{Bus, Published},
    counters::{Counter, Counters},
    outbox::Event,
    wake::Wakeup,
};

/// Events claimed per transaction: large enough that a backlog drains at the database's
/// pace, small enough that a batch is published well within the bus's publish timeout.
pub const BATCH: i64 = 500;
/// How often published events older than the retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// An outbox row as the relay claims it, read by column name.
#[derive(sqlx::FromRow)]
struct EventRow {
    id: uuid::Uuid,
    event_type: String,
    aggregate_type: String,
    aggregate_id: uuid::Uuid,
    payload: serde_json::Value,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl EventRow {
    fn into_event(self) -> Event {
        Event {
            id: self.id,
            event_type: self.event_type,
            aggregate_type: self.aggregate_type,
            aggregate_id: self.aggregate_id,
            payload: self.payload,
            created_at: self.created_at,
        }
    }
}

/// A relay: publishes the outbox of `db` to `bus`. Any number may run at once.
#[derive(Clone)]
pub struct Relay {
    /// The database whose outbox it publishes.
    pub db: PgPool,
    /// The bus it publishes to.
    pub bus: Arc<dyn Bus>,
    /// Where it counts what it publishes (`()` for nowhere).
    pub metrics: Arc<dyn Counters>,
}

impl Relay {
    /// Publishes one batch; returns how many events it published (0: nothing to do).
    pub async fn try_execute_task(&self) -> anyhow::Result<usize> {
        let mut tx = self.db.begin().await?;
        let events: Vec<Event> = sqlx::query_as::<_, EventRow>(
            "SELECT id, event_type, aggregate_type, aggregate_id, payload, created_at
               FROM outbox_events
              WHERE published_at IS NULL
              ORDER BY created_at
              LIMIT $1
                FOR UPDATE SKIP LOCKED",
        )
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(EventRow::into_event)
        .collect();
        if events.is_empty() {
            return Ok(0);
        }
        let messages: Vec<_> = events.iter().map(Event::to_message).collect();
        for published in self.bus.publish_all(&messages).await? {
            self.metrics.count(match published {
                Published::New => Counter::Published,
                Published::Duplicate => Counter::Republished,
            });
        }
        let ids: Vec<_> = events.iter().map(|e| e.id).collect();
        sqlx::query("UPDATE outbox_events SET published_at = now() WHERE id = ANY($1)")
            .bind(&ids[..])
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(events.len())
    }

    /// Publishes until `stop`: woken by `NOTIFY outbox_events`, polling every `poll`.
    pub async fn run(self, poll: Duration, retention: Duration, stop: CancellationToken) {
        let mut wakeup = Wakeup::new(self.db.clone(), "outbox_events", poll);
        let mut last_prune = tokio::time::Instant::now();
        while !stop.is_cancelled() {
            // On its own clock: a relay that always has work still prunes.
            if last_prune.elapsed() >= PRUNE_EVERY {
                last_prune = tokio::time::Instant::now();
                if let Err(e) = prune(&self.db, retention).await {
                    tracing::warn!(error = %e, "pruning published events failed");
                }
            }
            match self.try_execute_task().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "relay step failed; trying again"),
            }
            tokio::select! {
                _ = wakeup.wait(poll) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}

/// Rows deleted per statement when pruning, so no statement runs into the statement timeout.
const PRUNE_BATCH: i64 = 1000;

/// Deletes events published longer ago than `retention`, and bus messages every consumer
/// has settled by then, so neither table grows forever. Returns the events deleted.
pub async fn prune(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let cutoff =
        chrono::Utc::now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let events = delete_in_batches(|| {
        sqlx::query(
            "DELETE FROM outbox_events WHERE id IN (
                 SELECT id FROM outbox_events WHERE published_at < $1 LIMIT $2)",
        )
        .bind(cutoff)
        .bind(PRUNE_BATCH)
        .execute(db)
    })
    .await?;
    delete_in_batches(|| {
        sqlx::query(
            "DELETE FROM bus_messages WHERE id IN (
                 SELECT m.id FROM bus_messages m
                  WHERE m.published_at < $1
                    AND NOT EXISTS (SELECT 1 FROM bus_deliveries d
                                     WHERE d.message_id = m.id AND d.settled_at IS NULL)
                  LIMIT $2)",
        )
        .bind(cutoff)
        .bind(PRUNE_BATCH)
        .execute(db)
    })
    .await?;
    Ok(events)
}

/// Runs `delete` (one batch of at most `PRUNE_BATCH` rows) until a batch comes up short.
async fn delete_in_batches<F, Fut>(mut delete: F) -> Result<u64, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<PgQueryResult, sqlx::Error>>,
{
    let mut total = 0;
    loop {
        let deleted = delete().await?.rows_affected();
        total += deleted;
        if deleted < PRUNE_BATCH as u64 {
            return Ok(total);
        }
    }
}
