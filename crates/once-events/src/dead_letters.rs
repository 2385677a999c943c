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

#[derive(Debug, Serialize)]
pub struct DeadLetter {
    pub id: Uuid,
    pub consumer: String,
    pub message_id: String,
    pub subject: String,
    pub error: String,
    pub deliveries: i32,
    pub status: String,
}

/// Keeps `delivery` as a dead letter of `consumer` (or updates the one it already has).
pub async fn record(
    db: &PgPool,
    consumer: &str,
    delivery: &Delivery,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO dead_letters (id, consumer, message_id, subject, body, error, deliveries)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT ON CONSTRAINT dead_letters_one_per_message DO UPDATE
            SET error = EXCLUDED.error, deliveries = EXCLUDED.deliveries,
                status = 'dead', updated_at = now()",
        Uuid::new_v4(),
        consumer,
        &delivery.message.id,
        &delivery.message.subject,
        &delivery.message.body,
        error,
        (delivery.delivered as i32),
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn list(db: &PgPool) -> Result<Vec<DeadLetter>, sqlx::Error> {
    sqlx::query_as!(
        DeadLetter,
        "SELECT id, consumer, message_id, subject, error, deliveries, status
           FROM dead_letters ORDER BY created_at DESC",
    )
    .fetch_all(db)
    .await
}

#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error("there is no dead letter {0} waiting for a retry")]
    NotDead(Uuid),
    #[error("dead letter {0} belongs to consumer {1}, not {2}")]
    WrongConsumer(Uuid, String, &'static str),
    #[error("the retry failed again: {0}")]
    FailedAgain(String),
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
    let row = sqlx::query!(
        "UPDATE dead_letters SET status = 'retrying', updated_at = now()
          WHERE id = $1 AND status = 'dead'
      RETURNING consumer, message_id, subject, body",
        id,
    )
    .fetch_optional(db)
    .await?
    .ok_or(RetryError::NotDead(id))?;
    if row.consumer != handler.name() {
        set_status(db, id, "dead", None).await?;
        return Err(RetryError::WrongConsumer(id, row.consumer, handler.name()));
    }
    let message = Message {
        id: row.message_id,
        subject: row.subject,
        body: row.body,
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
    let done = sqlx::query!(
        "UPDATE dead_letters SET status = 'discarded', updated_at = now() WHERE id = $1 AND status = 'dead'",
        id,
    )
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
    sqlx::query!(
        "UPDATE dead_letters SET status = $2, error = coalesce($3, error), updated_at = now()
          WHERE id = $1 AND status = 'retrying'",
        id,
        status,
        error,
    )
    .execute(db)
    .await?;
    Ok(())
}
