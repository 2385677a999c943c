//! What a consumer runs for each event, and how it says what happened. A handler starts its
//! transaction with [`crate::consume_once`] and applies the event's effects in it only when
//! that says it is the first time.

use async_trait::async_trait;

use crate::{db_error, outbox::Event};

/// What a handler did with an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// Its side effects are committed.
    Done,
    /// It was consumed before (a redelivery or a republish): nothing was done.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
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

#[async_trait]
pub trait Handler: Send + Sync {
    /// The durable consumer's name and the subject (event type) it reads.
    fn name(&self) -> &'static str;
    fn subject(&self) -> &'static str;
    async fn handle(&self, event: &Event) -> Result<Handled, HandlerError>;
}
