//! Dead letters: messages a consumer gave up on, kept with the last error so that operators
//! can see them and, once the cause is fixed, retry them. A retry applies the kept message
//! as the consumer would, dedup included ([`crate::consume_once`]): retrying a letter whose
//! event was consumed meanwhile does nothing twice.

use std::sync::Arc;

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    bus::{Delivery, Message},
    handler::{apply_one, Handled, Handler, HandlerError},
    outbox::Event,
};

/// A dead letter, as operators see it (the message's body is kept, not shown).
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The dead letter's own id, which [`retry`] and [`discard`] take.
    pub id: Uuid,
    /// The consumer that gave up on the message.
    pub consumer: String,
    /// The message's id (the event's id).
    pub message_id: String,
    /// The message's subject (the event type).
    pub subject: String,
    /// Why the consumer gave up: the last error.
    pub error: String,
    /// How many times the message had been delivered.
    pub deliveries: i32,
    /// `dead` (waiting for an operator), `retrying`, `retried` or `discarded`.
    pub status: String,
}

/// Keeps `delivery` as a dead letter of `consumer` (or updates the one it already has).
pub async fn record(
    db: &PgPool,
    consumer: &str,
    delivery: &Delivery,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO dead_letters (id, consumer, message_id, subject, body, error, deliveries)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT ON CONSTRAINT dead_letters_one_per_message DO UPDATE
            SET error = EXCLUDED.error, deliveries = EXCLUDED.deliveries,
                status = 'dead', updated_at = now()",
    )
    .bind(Uuid::new_v4())
    .bind(consumer)
    .bind(&delivery.message.id)
    .bind(&delivery.message.subject)
    .bind(&delivery.message.body)
    .bind(error)
    .bind(delivery.delivered as i32)
    .execute(db)
    .await?;
    Ok(())
}

/// Every dead letter, newest first, whatever its status.
pub async fn list(db: &PgPool) -> Result<Vec<DeadLetter>, sqlx::Error> {
    let rows = sqlx::query_as::<_, (Uuid, String, String, String, String, i32, String)>(
        "SELECT id, consumer, message_id, subject, error, deliveries, status
           FROM dead_letters ORDER BY created_at DESC",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, consumer, message_id, subject, error, deliveries, status)| DeadLetter {
                id,
                consumer,
                message_id,
                subject,
                error,
                deliveries,
                status,
            },
        )
        .collect())
}

/// Why [`retry`] did not apply a dead letter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// No dead letter with this id waits for a retry (none, or retried, retrying or
    /// discarded already).
    #[error("there is no dead letter {0} waiting for a retry")]
    NotDead(Uuid),
    /// The dead letter is another consumer's: its id, its consumer, the handler's name. It
    /// stays dead.
    #[error("dead letter {0} belongs to consumer {1}, not {2}")]
    WrongConsumer(Uuid, String, &'static str),
    /// The handler failed again, with this error; the dead letter is dead again, with it.
    #[error("the retry failed again: {0}")]
    FailedAgain(String),
    /// The database failed.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Runs `handler` once more on dead letter `id`. The letter is claimed first (`dead →
/// retrying`), so a second retry or a discard meanwhile finds nothing to do. On success it
/// is `retried`; on failure it is dead again with the new error.
pub async fn retry(
    db: &PgPool,
    handler: &Arc<dyn Handler>,
    id: Uuid,
) -> Result<Handled, RetryError> {
    let (consumer, message_id, subject, body) =
        sqlx::query_as::<_, (String, String, String, Vec<u8>)>(
            "UPDATE dead_letters SET status = 'retrying', updated_at = now()
              WHERE id = $1 AND status = 'dead'
          RETURNING consumer, message_id, subject, body",
        )
        .bind(id)
        .fetch_optional(db)
        .await?
        .ok_or(RetryError::NotDead(id))?;
    if consumer != handler.name() {
        set_status(db, id, "dead", None).await?;
        return Err(RetryError::WrongConsumer(id, consumer, handler.name()));
    }
    let message = Message {
        id: message_id,
        subject,
        body,
    };
    let outcome = match Event::from_message(&message) {
        Err(reason) => Err(HandlerError::Poison(reason)),
        Ok(event) => apply_one(db, handler.as_ref(), &event).await,
    };
    match outcome {
        Ok(handled) => {
            set_status(db, id, "retried", None).await?;
            Ok(handled)
        }
        Err(e) => {
            let error = format!("{e:#}");
            set_status(db, id, "dead", Some(&error)).await?;
            Err(RetryError::FailedAgain(error))
        }
    }
}

/// Lets a dead letter go without running it.
pub async fn discard(db: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE dead_letters SET status = 'discarded', updated_at = now() WHERE id = $1 AND status = 'dead'",
    )
    .bind(id)
    .execute(db)
    .await?
    .rows_affected();
    Ok(done == 1)
}

async fn set_status(
    db: &PgPool,
    id: Uuid,
    status: &str,
    error: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE dead_letters SET status = $2, error = coalesce($3, error), updated_at = now()
          WHERE id = $1 AND status = 'retrying'",
    )
    .bind(id)
    .bind(status)
    .bind(error)
    .execute(db)
    .await?;
    Ok(())
}
