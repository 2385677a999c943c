//! What every bus implements and what it carries. Consumers are written against these
//! traits only, so moving between buses changes no consumer code.

use std::time::Duration;

use async_trait::async_trait;

/// A message: its id (the event id: both buses drop a second publish of the same id), its
/// subject (the event type, e.g. `order.paid`) and its body (the event as JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The message id: the event's id, which both buses dedup on.
    pub id: String,
    /// The subject: the event type (without the JetStream subject prefix).
    pub subject: String,
    /// The body: the event, as JSON.
    pub body: Vec<u8>,
}

/// What publishing did: stored a new message, or recognised one already published.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Published {
    /// The bus did not have the message, and stored it.
    New,
    /// The bus had the message already (same id), and left it alone.
    Duplicate,
}

impl Published {
    /// `New`, unless the bus said it had the message already.
    pub fn new_unless(duplicate: bool) -> Self {
        if duplicate {
            Self::Duplicate
        } else {
            Self::New
        }
    }
}

/// The most deliveries the bus makes of one message: a backstop against a message looping
/// forever, far beyond the consumer's own limit. The consumer gives up on a message after its
/// tries, and only once its dead letter is written; if that cannot be written (the database
/// is away), the message keeps coming back with the consumer's backoff (capped at a minute
/// by default), so the bus would drop it only after days of outage.
pub const MAX_DELIVER: u32 = 10_000;

/// A durable consumer: its name, the one subject it reads, and how long a delivery may stay
/// unanswered before it is delivered again.
#[derive(Clone, Debug)]
pub struct ConsumerSpec {
    /// The durable consumer's name: its deliveries and its dedup records are kept under it.
    pub name: &'static str,
    /// The one subject (event type) it reads.
    pub subject: &'static str,
    /// How long a delivery may stay unanswered before it is delivered again.
    pub ack_wait: Duration,
}

/// Where the relay publishes events and consumers subscribe to them: the PostgreSQL bus
/// ([`super::postgres::PgBus`]) or NATS JetStream ([`super::nats::NatsBus`]), or a bus of
/// your own. A bus stores a message once per id, and delivers it at least once to each
/// durable consumer of its subject.
#[async_trait]
pub trait Bus: Send + Sync {
    /// Publishes a batch; returns what publishing did to each message, in order. `Ok` only
    /// once the bus has stored (or recognised) every one of them: a relay marks its events
    /// published on that answer alone.
    async fn publish_all(&self, messages: &[Message]) -> anyhow::Result<Vec<Published>>;

    /// Subscribes the durable consumer `consumer` (creating it if it is new): its
    /// deliveries, fetched from the returned [`Subscription`].
    async fn subscribe(&self, consumer: &ConsumerSpec) -> anyhow::Result<Box<dyn Subscription>>;

    /// How many messages wait for `consumer` (not delivered yet, or delivered and not
    /// acked), where the bus keeps that count itself (JetStream); `None` where deliveries
    /// are rows the database counts (the PostgreSQL bus's `bus_deliveries`).
    async fn waiting(&self, _consumer: &str) -> anyhow::Result<Option<u64>> {
        Ok(None)
    }

    /// Publishes one message.
    async fn publish(&self, message: &Message) -> anyhow::Result<Published> {
        let mut published = self.publish_all(std::slice::from_ref(message)).await?;
        published
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the bus answered nothing for {}", message.id))
    }
}

/// A durable consumer's deliveries, as one subscriber fetches them.
#[async_trait]
pub trait Subscription: Send + Sync {
    /// Up to `max` deliveries: those ready now, or else the first ones to arrive within `wait`.
    async fn fetch(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Delivery>>;

    /// Acks every delivery in `deliveries`, all at once where the bus can (one statement on
    /// PostgreSQL); by default, each one's own [`Acker::ack`], concurrently.
    async fn ack_all(&self, deliveries: &[&Delivery]) -> anyhow::Result<()> {
        let acks = deliveries.iter().map(|d| d.acker.ack());
        futures::future::try_join_all(acks).await?;
        Ok(())
    }
}

/// How a delivery is answered.
#[async_trait]
pub trait Acker: Send + Sync {
    /// Done: never deliver it again.
    async fn ack(&self) -> anyhow::Result<()>;
    /// Not done: deliver it again after `delay`.
    async fn nak(&self, delay: Duration) -> anyhow::Result<()>;
    /// Given up (a dead letter now holds it): never deliver it again.
    async fn term(&self) -> anyhow::Result<()>;
}

/// One delivery of a message; `delivered` counts deliveries of it to this consumer, from 1.
pub struct Delivery {
    /// The message delivered.
    pub message: Message,
    /// How many times it has been delivered to this consumer, this time included (from 1).
    pub delivered: u32,
    /// How this delivery is answered.
    pub acker: Box<dyn Acker>,
}
