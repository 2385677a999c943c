//! The PostgreSQL bus: `bus_messages` holds each message once (its id is the primary key),
//! and `bus_deliveries` one row per message and durable consumer, with the number of
//! deliveries so far and the time it may be delivered again. A fetch claims ready rows with
//! `FOR UPDATE SKIP LOCKED` and pushes their visibility out by the ack wait, so a consumer
//! that dies before it answers gets the message again later, as on JetStream.

use std::{collections::HashSet, time::Duration};

use async_trait::async_trait;
use sqlx::PgPool;
use uuid::Uuid;

use super::contract::{
    Acker, Bus, ConsumerSpec, Delivery, Message, Published, Subscription, MAX_DELIVER,
};
use crate::wake::Wakeup;

/// The PostgreSQL bus, in the app's own database (the chain's `bus_*` tables).
pub struct PgBus {
    db: PgPool,
    poll: Duration,
}

impl PgBus {
    /// The bus on `db`; a subscription not woken by a notification looks for messages
    /// every `poll`.
    pub fn new(db: PgPool, poll: Duration) -> Self {
        Self { db, poll }
    }
}

#[async_trait]
impl Bus for PgBus {
    /// One statement for the whole batch: the messages the bus lacks are stored, and each
    /// gets a delivery row per consumer of its subject; the ones it has are left alone.
    async fn publish_all(&self, messages: &[Message]) -> anyhow::Result<Vec<Published>> {
        let ids = messages
            .iter()
            .map(|m| Uuid::parse_str(&m.id))
            .collect::<Result<Vec<_>, _>>()?;
        let subjects: Vec<&str> = messages.iter().map(|m| m.subject.as_str()).collect();
        let bodies: Vec<&[u8]> = messages.iter().map(|m| m.body.as_slice()).collect();
        let stored: Vec<Uuid> = sqlx::query_scalar(
            "WITH stored AS (
                   INSERT INTO bus_messages (id, subject, body)
                   SELECT * FROM unnest($1::uuid[], $2::text[], $3::bytea[])
                   ON CONFLICT ON CONSTRAINT bus_messages_pkey DO NOTHING
                   RETURNING id, subject),
               delivered AS (
                   INSERT INTO bus_deliveries (consumer, message_id)
                   SELECT c.name, s.id FROM stored s JOIN bus_consumers c ON c.subject = s.subject)
               SELECT id FROM stored",
        )
        .bind(&ids[..])
        .bind(&subjects[..])
        .bind(&bodies[..])
        .fetch_all(&self.db)
        .await?;
        let mut new: HashSet<Uuid> = stored.into_iter().collect();
        // A message is new if this statement stored it; a second copy in the same batch is not.
        Ok(ids
            .iter()
            .map(|id| Published::new_unless(!new.remove(id)))
            .collect())
    }

    /// Registers the consumer (a `bus_consumers` row) if it is new: from then on every
    /// message published on its subject gets a delivery for it. A consumer that must also
    /// see what was published before its first subscribe is declared earlier, in a
    /// migration, as a JetStream consumer would be created before use.
    async fn subscribe(&self, consumer: &ConsumerSpec) -> anyhow::Result<Box<dyn Subscription>> {
        sqlx::query(
            "INSERT INTO bus_consumers (name, subject) VALUES ($1, $2)
             ON CONFLICT ON CONSTRAINT bus_consumers_pkey DO NOTHING",
        )
        .bind(consumer.name)
        .bind(consumer.subject)
        .execute(&self.db)
        .await?;
        let registered: String =
            sqlx::query_scalar("SELECT subject FROM bus_consumers WHERE name = $1")
                .bind(consumer.name)
                .fetch_one(&self.db)
                .await?;
        // One name, one subject: a consumer whose name is taken on another subject would
        // otherwise read that subject's messages without a word.
        anyhow::ensure!(
            registered == consumer.subject,
            "consumer {} is registered on {}, not {}",
            consumer.name,
            registered,
            consumer.subject
        );
        Ok(Box::new(PgSubscription {
            db: self.db.clone(),
            spec: consumer.clone(),
            wakeup: Wakeup::new(self.db.clone(), "bus_deliveries", self.poll),
        }))
    }
}

struct PgSubscription {
    db: PgPool,
    spec: ConsumerSpec,
    wakeup: Wakeup,
}

#[derive(sqlx::FromRow)]
struct Claimed {
    message_id: Uuid,
    subject: String,
    body: Vec<u8>,
    deliveries: i32,
}

impl PgSubscription {
    async fn claim(&self, max: usize) -> anyhow::Result<Vec<Delivery>> {
        // The ack wait is a `std::time::Duration`, which sqlx encodes as an interval.
        let rows = sqlx::query_as::<_, Claimed>(
            "UPDATE bus_deliveries d
                SET deliveries = d.deliveries + 1, visible_at = now() + $3
               FROM bus_messages m
              WHERE m.id = d.message_id
                AND (d.consumer, d.message_id) IN (
                    SELECT consumer, message_id FROM bus_deliveries
                     WHERE consumer = $1 AND settled_at IS NULL AND visible_at <= now()
                       AND deliveries < $4
                     ORDER BY visible_at
                     LIMIT $2
                       FOR UPDATE SKIP LOCKED)
          RETURNING d.message_id, m.subject, m.body, d.deliveries",
        )
        .bind(self.spec.name)
        .bind(max as i64)
        .bind(self.spec.ack_wait)
        .bind(MAX_DELIVER as i32)
        .fetch_all(&self.db)
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| Delivery {
                message: Message {
                    id: row.message_id.to_string(),
                    subject: row.subject,
                    body: row.body,
                },
                delivered: row.deliveries as u32,
                acker: Box::new(PgAcker {
                    db: self.db.clone(),
                    consumer: self.spec.name,
                    message_id: row.message_id,
                }),
            })
            .collect())
    }
}

#[async_trait]
impl Subscription for PgSubscription {
    async fn fetch(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Delivery>> {
        let claimed = self.claim(max).await?;
        if !claimed.is_empty() {
            return Ok(claimed);
        }
        self.wakeup.wait(wait).await;
        self.claim(max).await
    }

    /// One statement settles the whole batch.
    async fn ack_all(&self, deliveries: &[&Delivery]) -> anyhow::Result<()> {
        let ids = deliveries
            .iter()
            .map(|d| Uuid::parse_str(&d.message.id))
            .collect::<Result<Vec<_>, _>>()?;
        sqlx::query(
            "UPDATE bus_deliveries SET settled_at = now()
              WHERE consumer = $1 AND message_id = ANY($2) AND settled_at IS NULL",
        )
        .bind(self.spec.name)
        .bind(&ids[..])
        .execute(&self.db)
        .await?;
        Ok(())
    }
}

struct PgAcker {
    db: PgPool,
    consumer: &'static str,
    message_id: Uuid,
}

impl PgAcker {
    async fn settle(&self) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE bus_deliveries SET settled_at = now() WHERE consumer = $1 AND message_id = $2",
        )
        .bind(self.consumer)
        .bind(self.message_id)
        .execute(&self.db)
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Acker for PgAcker {
    async fn ack(&self) -> anyhow::Result<()> {
        self.settle().await
    }

    async fn nak(&self, delay: Duration) -> anyhow::Result<()> {
        // PostgreSQL intervals stop at microseconds.
        let delay = Duration::from_micros(delay.as_micros() as u64);
        sqlx::query(
            "UPDATE bus_deliveries SET visible_at = now() + $3
              WHERE consumer = $1 AND message_id = $2 AND settled_at IS NULL",
        )
        .bind(self.consumer)
        .bind(self.message_id)
        .bind(delay)
        .execute(&self.db)
        .await?;
        Ok(())
    }

    async fn term(&self) -> anyhow::Result<()> {
        self.settle().await
    }
}
