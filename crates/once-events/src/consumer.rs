//! Running a consumer: fetch deliveries from the bus in batches, apply their events, answer
//! the bus. The same code runs on both buses. The exactly-once part is the transaction
//! ([`crate::handler::apply_in_one_tx`]): each event is recorded as consumed
//! ([`crate::consume_once`]) in the transaction of its effects, because the bus delivers at
//! least once.
//!
//! A batch is applied in one transaction and acked at once, which is what lets a consumer
//! keep up with a busy application. If that transaction fails, nothing of it stays, and its events
//! are applied again one transaction each, so one bad event is retried or dead-lettered on
//! its own and never holds back its neighbours. What to do when an event fails: retry with
//! exponential backoff and full jitter, and after the last try, a dead letter with the last
//! error (`dead_letters`). The bus does not give up on a message by itself (short of a far
//! backstop): this code does, and only once the dead letter is written.

use std::{sync::Arc, time::Duration};

use rand::Rng;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    bus::{ConsumerSpec, Delivery, Subscription},
    counters::{Counter, Counters},
    db_error, dead_letters,
    handler::{apply_in_one_tx, apply_one, Handled, Handler, HandlerError},
    outbox::Event,
};

/// Deliveries fetched and applied at once, unless the app says otherwise. A consumer that
/// dies holding a batch leaves its messages to come back after the ack wait, so a batch must
/// take far less than that: a hundred events take a few hundred milliseconds at most.
pub const BATCH: usize = 100;
/// A message delivered this many times its tries without an answer has killed its consumer
/// each time (or hung it past the ack wait): it is written off rather than looped on.
const UNANSWERED_FACTOR: u32 = 2;
/// The longest a consumer that met an outage waits for the database before fetching again.
/// Every fetch during an outage would send its messages back once more, and enough of those
/// would look like a message that kills its consumer ([`UNANSWERED_FACTOR`]).
const OUTAGE_WAIT: Duration = Duration::from_secs(30);

/// What one fetched batch came to: how many deliveries, and whether the database was away.
struct Processed {
    count: usize,
    outage: bool,
}

/// Tries and backoff between them.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// How many times an event is tried before it becomes a dead letter (an outage of the
    /// database does not count: it is waited out).
    pub max_attempts: u32,
    /// The backoff's ceiling after the first failed try; it doubles with each try after.
    pub base: Duration,
    /// The longest backoff.
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

/// A running consumer: a handler on a subscription. Build it with the subscription of
/// [`Consumer::spec`], then [`run`](Consumer::run) it (or step it with
/// [`try_execute_task`](Consumer::try_execute_task)).
pub struct Consumer {
    /// The database the handler's transactions (and the dead letters) are written in.
    pub db: PgPool,
    /// Where its deliveries come from.
    pub subscription: Box<dyn Subscription>,
    /// What it runs for each event.
    pub handler: Arc<dyn Handler>,
    /// Its tries and the backoff between them.
    pub policy: RetryPolicy,
    /// Where it counts what happens (`()` for nowhere).
    pub metrics: Arc<dyn Counters>,
    /// Deliveries fetched and applied at once ([`BATCH`] unless the app says otherwise).
    pub batch: usize,
    /// For fault tests only (zero otherwise): a pause between the handler's commit and the
    /// ack, so that a test can kill the consumer in between.
    pub pause_before_ack: Duration,
}

impl Consumer {
    /// The bus-side settings of a consumer for `handler`. Its delivery limit is the bus's
    /// far backstop ([`crate::bus::MAX_DELIVER`]), not the tries: a bus that stopped at the
    /// tries would drop a message whose dead letter could not be written.
    pub fn spec(handler: &dyn Handler, ack_wait: Duration) -> ConsumerSpec {
        ConsumerSpec {
            name: handler.name(),
            subject: handler.subject(),
            ack_wait,
        }
    }

    /// Fetches one batch (waiting at most `wait`) and answers every delivery in it.
    pub async fn try_execute_task(&mut self, wait: Duration) -> anyhow::Result<usize> {
        let deliveries = self.subscription.fetch(self.batch, wait).await?;
        let processed = self.process_all(deliveries).await;
        if processed.outage {
            self.wait_for_database().await;
        }
        Ok(processed.count)
    }

    async fn process_all(&self, deliveries: Vec<Delivery>) -> Processed {
        let count = deliveries.len();
        let (mut batch, mut alone) = (Vec::with_capacity(count), Vec::new());
        for delivery in deliveries {
            self.metrics.count(Counter::Delivery);
            match self.readable(&delivery) {
                // A message that came back (its try failed, or its consumer died holding it)
                // is tried alone: whatever went wrong with it does not come back on the
                // first-time deliveries next to it.
                Ok(event) if delivery.delivered > 1 => alone.push((delivery, event)),
                Ok(event) => batch.push((delivery, event)),
                Err(reason) => {
                    self.answer(&delivery, Err(HandlerError::Poison(reason)))
                        .await
                }
            }
        }
        let mut outage = false;
        match batch.len() {
            0 => {}
            1 => alone.append(&mut batch),
            _ => match self.apply_batch(&batch).await {
                Ok(()) => {}
                Err(e) if splits(&e) => alone.append(&mut batch),
                // The database is away or busy: its events wait as a batch, not one by one.
                Err(e) => {
                    outage = true;
                    for (delivery, _) in &batch {
                        self.answer_retry(delivery, &e).await;
                    }
                }
            },
        }
        for (delivery, event) in &alone {
            let outcome = apply_one(&self.db, self.handler.as_ref(), event).await;
            outage |= matches!(&outcome, Err(e) if !splits(e));
            self.answer(delivery, outcome).await;
        }
        Processed { count, outage }
    }

    /// Waits (at most [`OUTAGE_WAIT`]) until the database takes writes again, so that an
    /// outage costs each message one delivery, not one per fetch while it lasts.
    async fn wait_for_database(&self) {
        let deadline = tokio::time::Instant::now() + OUTAGE_WAIT;
        let mut attempt = 1;
        while tokio::time::Instant::now() < deadline && !takes_writes(&self.db).await {
            let pause = self.policy.backoff(attempt).max(Duration::from_millis(50));
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// The event a delivery carries, or why it will never be applied: a body that is not an
    /// event, or a message that came back too often without an answer.
    fn readable(&self, delivery: &Delivery) -> Result<Event, String> {
        if delivery.delivered > UNANSWERED_FACTOR * self.policy.max_attempts {
            return Err(format!(
                "delivered {} times without an answer (its consumer died or hung each time)",
                delivery.delivered
            ));
        }
        Event::from_message(&delivery.message)
    }

    /// Applies a whole batch in one transaction and acks it; the error (nothing applied,
    /// nothing answered) if the transaction failed.
    async fn apply_batch(&self, batch: &[(Delivery, Event)]) -> Result<(), HandlerError> {
        let events: Vec<&Event> = batch.iter().map(|(_, event)| event).collect();
        let handled = apply_in_one_tx(&self.db, self.handler.as_ref(), &events)
            .await
            .inspect_err(|e| {
                if splits(e) {
                    self.metrics.count(Counter::BatchSplit);
                }
                tracing::info!(consumer = self.handler.name(), events = batch.len(),
                    error = %format!("{e:#}"), "a batch failed");
            })?;
        for handled in handled {
            self.count_handled(handled);
        }
        self.pause_if_asked().await;
        let deliveries: Vec<&Delivery> = batch.iter().map(|(delivery, _)| delivery).collect();
        if let Err(e) = self.subscription.ack_all(&deliveries).await {
            // Unanswered: the bus delivers them again after the ack wait, and the dedup
            // skips what was applied.
            tracing::warn!(consumer = self.handler.name(), error = %format!("{e:#}"),
                "could not ack a batch");
        }
        Ok(())
    }

    /// Answers one delivery for what applying its event did.
    async fn answer(&self, delivery: &Delivery, outcome: Result<Handled, HandlerError>) {
        let answered = match outcome {
            Ok(handled) => {
                self.count_handled(handled);
                self.pause_if_asked().await;
                delivery.acker.ack().await
            }
            Err(HandlerError::Poison(reason)) => self.give_up(delivery, &reason).await,
            Err(HandlerError::Transient(e)) if delivery.delivered >= self.policy.max_attempts => {
                self.give_up(delivery, &format!("{e:#}")).await
            }
            Err(e) => return self.answer_retry(delivery, &e).await,
        };
        self.warn_unanswered(delivery, answered);
    }

    /// Sends a delivery back for a later try (an outage: never a dead letter).
    async fn answer_retry(&self, delivery: &Delivery, e: &HandlerError) {
        let answered = self.retry_later(delivery, e).await;
        self.warn_unanswered(delivery, answered);
    }

    fn warn_unanswered(&self, delivery: &Delivery, answered: anyhow::Result<()>) {
        if let Err(e) = answered {
            // Unanswered: the bus delivers it again after the ack wait.
            tracing::warn!(consumer = self.handler.name(), message = %delivery.message.id,
                error = %format!("{e:#}"), "could not answer a delivery");
        }
    }

    fn count_handled(&self, handled: Handled) {
        if handled == Handled::Duplicate {
            self.metrics.count(Counter::DuplicateSkipped);
        }
    }

    async fn pause_if_asked(&self) {
        if !self.pause_before_ack.is_zero() {
            tokio::time::sleep(self.pause_before_ack).await;
        }
    }

    async fn retry_later(&self, delivery: &Delivery, e: &HandlerError) -> anyhow::Result<()> {
        self.metrics.count(Counter::Retry);
        tracing::warn!(consumer = self.handler.name(), message = %delivery.message.id,
            try_no = delivery.delivered, error = %format!("{e:#}"), "handler failed; retrying later");
        delivery
            .acker
            .nak(self.policy.backoff(delivery.delivered))
            .await
    }

    /// Keeps the message as a dead letter, then tells the bus to stop delivering it. If the
    /// dead letter cannot be written (the database is away), the message is not let go: it
    /// comes back after a backoff, and is given up again then.
    async fn give_up(&self, delivery: &Delivery, reason: &str) -> anyhow::Result<()> {
        let recorded = dead_letters::record(&self.db, self.handler.name(), delivery, reason).await;
        if let Err(e) = recorded {
            tracing::warn!(consumer = self.handler.name(), message = %delivery.message.id,
                error = %e, "cannot write the dead letter; keeping the message");
            return delivery
                .acker
                .nak(self.policy.backoff(delivery.delivered))
                .await;
        }
        self.metrics.count(Counter::DeadLetter);
        tracing::error!(consumer = self.handler.name(), message = %delivery.message.id,
            reason, "message is a dead letter");
        delivery.acker.term().await
    }

    /// Consumes until `stop`. Only the wait for messages is cut short: deliveries in hand
    /// are finished and answered first, so a graceful stop abandons nothing halfway.
    pub async fn run(mut self, poll: Duration, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let fetched = tokio::select! {
                fetched = self.subscription.fetch(self.batch, poll) => fetched,
                _ = stop.cancelled() => break,
            };
            match fetched {
                // Deliveries in hand are answered first; only the wait for the database
                // after an outage is cut short by a stop.
                Ok(deliveries) => {
                    if self.process_all(deliveries).await.outage {
                        tokio::select! {
                            _ = self.wait_for_database() => {}
                            _ = stop.cancelled() => {}
                        }
                    }
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

/// Whether a new transaction on `db` may write: the database is reachable and, during a
/// failover, the node reached is the primary and open for writes.
async fn takes_writes(db: &PgPool) -> bool {
    sqlx::query_scalar::<_, bool>("SELECT NOT current_setting('transaction_read_only')::bool")
        .fetch_one(db)
        .await
        .unwrap_or(false)
}

/// Whether a failed batch is applied again one event at a time: when an event in it failed
/// (a poison or a bug) or the batch lost a deadlock, but not when the database is away or
/// busy, where a hundred single tries would only wait a hundred times.
fn splits(e: &HandlerError) -> bool {
    match e {
        HandlerError::Unavailable(e) => db_error::is_conflict(e),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_is_jittered_under_its_doubling_ceiling_and_the_cap() {
        let ms = Duration::from_millis;
        let policy = RetryPolicy {
            max_attempts: 5,
            base: ms(100),
            cap: ms(1000),
        };
        for _ in 0..200 {
            assert!(policy.backoff(1) <= ms(100));
            assert!(policy.backoff(3) <= ms(400));
            assert!(policy.backoff(40) <= ms(1000), "capped, without overflow");
        }
    }
}
