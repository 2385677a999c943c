//! What a consumer runs for its events, and how it says what happened. A handler applies
//! events' effects in a transaction it is handed; the runtime ([`apply_in_one_tx`]) has
//! recorded the events as consumed in that same transaction first ([`crate::consume_once`]),
//! and never hands over an event consumed before. So no handler can forget the dedup,
//! and several events can share one transaction, each deduplicated on its own.

use async_trait::async_trait;
use sqlx::{PgConnection, PgPool};

use uuid::Uuid;

use crate::{db_error, dedup::consume_all, outbox::Event};

/// What became of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handled {
    /// Its side effects are committed.
    Done,
    /// It was consumed before (a redelivery or a republish): nothing was done.
    Duplicate,
}

/// Why a handler did not apply an event, which decides what happens to it next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// Trying again cannot help (malformed or unknown event): a dead letter at once.
    #[error("{0}")]
    Poison(String),
    /// May succeed later (a bug fixed later, data corrected): retried, then a dead letter.
    #[error(transparent)]
    Transient(#[from] anyhow::Error),
    /// The infrastructure is away or busy (connection lost, pool exhausted, lock or
    /// statement timeout, deadlock): retried for as long as it takes, never a dead letter,
    /// so an outage does not turn every message in flight into an operator's chore.
    #[error("database unavailable: {0}")]
    Unavailable(sqlx::Error),
}

impl From<sqlx::Error> for HandlerError {
    fn from(e: sqlx::Error) -> Self {
        if db_error::is_transient(&e) {
            Self::Unavailable(e)
        } else {
            Self::Transient(e.into())
        }
    }
}

/// A consumer's work: what it does with the events of its subject.
#[async_trait]
pub trait Handler: Send + Sync {
    /// The durable consumer's name, under which its deliveries, its dedup records and its
    /// dead letters are kept.
    fn name(&self) -> &'static str;
    /// The subject (event type) it reads.
    fn subject(&self) -> &'static str;

    /// Applies the effects of `events` in `tx`, where each is already recorded as consumed
    /// (none of them was consumed before). Never commits: the runtime commits the records
    /// and the effects together, and an error undoes both; so return every database error
    /// rather than swallow it (a transaction with a failed statement commits nothing, which
    /// the runtime checks before it acks). Several events at once let a handler do their
    /// work in a few set-based statements; take locks in one fixed order (sorted keys), so
    /// that consumers applying batches side by side wait for each other, not deadlock.
    async fn apply(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError>;

    /// Told, in the same transaction, of the events in a batch that were consumed before
    /// (a redelivery, a republish): nothing of theirs is applied, and an application may
    /// record that it skipped them. An error undoes the whole batch, as `apply`'s does.
    async fn skipped(
        &self,
        _tx: &mut PgConnection,
        _events: &[&Event],
    ) -> Result<(), HandlerError> {
        Ok(())
    }

    /// Told when the database was unavailable, for an app that reacts to lost connections
    /// (by making its pool check its other connections, say).
    fn on_unavailable(&self, _error: &sqlx::Error) {}
}

/// Applies `events` in one transaction: [`crate::consume_once`] for each (one statement for
/// all), and the handler's effects for those consumed the first time. All commit together or none does; an error names no event, so a
/// caller that wants to know which one failed runs them one at a time.
pub async fn apply_in_one_tx(
    db: &PgPool,
    handler: &dyn Handler,
    events: &[&Event],
) -> Result<Vec<Handled>, HandlerError> {
    let applied = try_apply(db, handler, events).await;
    if let Err(HandlerError::Unavailable(e)) = &applied {
        handler.on_unavailable(e);
    }
    applied
}

/// [`apply_in_one_tx`] for one event.
pub async fn apply_one(
    db: &PgPool,
    handler: &dyn Handler,
    event: &Event,
) -> Result<Handled, HandlerError> {
    Ok(apply_in_one_tx(db, handler, &[event]).await?[0])
}

async fn try_apply(
    db: &PgPool,
    handler: &dyn Handler,
    events: &[&Event],
) -> Result<Vec<Handled>, HandlerError> {
    let mut tx = db.begin().await?;
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let first = consume_all(&mut tx, handler.name(), &ids).await?;
    let pick = |want: bool| -> Vec<&Event> {
        events
            .iter()
            .zip(&first)
            .filter_map(|(event, &first)| (first == want).then_some(*event))
            .collect()
    };
    let (new, seen_before) = (pick(true), pick(false));
    if !new.is_empty() {
        handler.apply(&mut tx, &new).await?;
    }
    if !seen_before.is_empty() {
        handler.skipped(&mut tx, &seen_before).await?;
    }
    // A transaction in which a statement failed answers COMMIT with a rollback and no error;
    // a handler that swallowed that failure would have the whole batch acked with nothing
    // done. Any statement fails in such a transaction (25P02), so one is run first.
    sqlx::query("SELECT 1").execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(first
        .into_iter()
        .map(|first| {
            if first {
                Handled::Done
            } else {
                Handled::Duplicate
            }
        })
        .collect())
}
