//! Running a consumer: fetch deliveries from the bus, hand each event to its [`Handler`],
//! answer the bus. The same code runs on both buses. The exactly-once part is not here: it
//! is in each handler's transaction (`consumed_events`), because the bus delivers at least
//! once. What is here is what to do when a handler fails: retry with exponential backoff and
//! full jitter, and after the last try, a dead letter with the last error (`dead_letters`).
//! See docs/design.md, "Fulfillment".

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rand::Rng;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    bus::{ConsumerSpec, Delivery, Subscription},
    dead_letters,
    metrics::Metrics,
    outbox::Event,
};

/// Deliveries fetched at once.
const BATCH: usize = 10;

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
    /// May succeed later (database away, lock timeout, a bug fixed later): retried.
    #[error(transparent)]
    Transient(#[from] anyhow::Error),
}

impl From<sqlx::Error> for HandlerError {
    fn from(e: sqlx::Error) -> Self {
        Self::Transient(e.into())
    }
}

#[async_trait]
pub trait Handler: Send + Sync {
    /// The durable consumer's name and the subject (event type) it reads.
    fn name(&self) -> &'static str;
    fn subject(&self) -> &'static str;
    async fn handle(&self, event: &Event) -> Result<Handled, HandlerError>;
}

/// Tries and backoff between them.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl RetryPolicy {
    /// The wait after failed try `attempt` (from 1): uniform in `[0, min(cap, base·2^(attempt-1))]`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let ceiling = exp.min(self.cap);
        let wait = ceiling.mul_f64(rand::rng().random::<f64>());
        Duration::from_millis(wait.as_millis() as u64)
    }
}

pub struct Consumer {
    pub db: PgPool,
    pub subscription: Box<dyn Subscription>,
    pub handler: Arc<dyn Handler>,
    pub policy: RetryPolicy,
    pub metrics: Arc<Metrics>,
    /// Test-only: a pause between the handler's commit and the ack (see `Events`).
    pub pause_before_ack: Duration,
}

impl Consumer {
    /// The bus-side settings of a consumer for `handler`: one spare delivery beyond the
    /// tries, so a message whose last try died with its process still reaches a consumer,
    /// which then writes it off as a dead letter.
    pub fn spec(handler: &dyn Handler, policy: &RetryPolicy, ack_wait: Duration) -> ConsumerSpec {
        ConsumerSpec {
            name: handler.name(),
            subject: handler.subject(),
            max_deliver: policy.max_attempts + 1,
            ack_wait,
        }
    }

    /// Fetches one batch (waiting at most `wait`) and answers every delivery in it.
    pub async fn try_execute_task(&mut self, wait: Duration) -> anyhow::Result<usize> {
        let deliveries = self.subscription.fetch(BATCH, wait).await?;
        Ok(self.process_all(deliveries).await)
    }

    async fn process_all(&self, deliveries: Vec<Delivery>) -> usize {
        let count = deliveries.len();
        for delivery in deliveries {
            let id = delivery.message.id.clone();
            if let Err(e) = self.process(delivery).await {
                // Unanswered: the bus delivers it again after the ack wait.
                tracing::warn!(consumer = self.handler.name(), message = %id,
                    error = %format!("{e:#}"), "could not answer a delivery");
            }
        }
        count
    }

    async fn process(&self, delivery: Delivery) -> anyhow::Result<()> {
        Metrics::inc(&self.metrics.deliveries);
        if delivery.delivered > self.policy.max_attempts {
            let reason = format!(
                "delivered {} times without an answer (its consumer died each time)",
                delivery.delivered
            );
            return self.give_up(&delivery, &reason).await;
        }
        let outcome = match Event::from_message(&delivery.message) {
            Err(reason) => Err(HandlerError::Poison(reason)),
            Ok(event) => self.handler.handle(&event).await,
        };
        match outcome {
            Ok(handled) => {
                if handled == Handled::Duplicate {
                    Metrics::inc(&self.metrics.duplicates_skipped);
                }
                if !self.pause_before_ack.is_zero() {
                    tokio::time::sleep(self.pause_before_ack).await;
                }
                delivery.acker.ack().await
            }
            Err(HandlerError::Poison(reason)) => self.give_up(&delivery, &reason).await,
            Err(HandlerError::Transient(e)) if delivery.delivered >= self.policy.max_attempts => {
                self.give_up(&delivery, &format!("{e:#}")).await
            }
            Err(HandlerError::Transient(e)) => {
                Metrics::inc(&self.metrics.retries);
                tracing::warn!(consumer = self.handler.name(), message = %delivery.message.id,
                    try_no = delivery.delivered, error = %format!("{e:#}"), "handler failed; retrying later");
                delivery
                    .acker
                    .nak(self.policy.backoff(delivery.delivered))
                    .await
            }
        }
    }

    /// Keeps the message as a dead letter, then tells the bus to stop delivering it. If the
    /// dead letter cannot be written (the database is away), the message is not let go: it
    /// comes back after the ack wait.
    async fn give_up(&self, delivery: &Delivery, reason: &str) -> anyhow::Result<()> {
        dead_letters::record(&self.db, self.handler.name(), delivery, reason).await?;
        Metrics::inc(&self.metrics.dead_letters);
        tracing::error!(consumer = self.handler.name(), message = %delivery.message.id,
            reason, "message is a dead letter");
        delivery.acker.term().await
    }

    /// Consumes until `stop`. Only the wait for messages is cut short: deliveries in hand
    /// are finished and answered first, so a graceful stop abandons nothing halfway.
    pub async fn run(mut self, poll: Duration, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let fetched = tokio::select! {
                fetched = self.subscription.fetch(BATCH, poll) => fetched,
                _ = stop.cancelled() => break,
            };
            match fetched {
                Ok(deliveries) => {
                    self.process_all(deliveries).await;
                }
                Err(e) => {
                    tracing::warn!(consumer = self.handler.name(), error = %format!("{e:#}"),
                        "fetching from the bus failed; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = stop.cancelled() => {}
                    }
                }
            }
        }
    }
}
