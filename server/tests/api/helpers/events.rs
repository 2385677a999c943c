//! Driving the event chain in tests: paid orders made through the real apply path, the
//! relay, consumers and mailer of a test app run step by step or as tasks, a bus wrapper
//! that makes the real bus deliver every message two or three times, and the invariants
//! every chain test checks.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use once_events::{
    bus::{self, Acker, Delivery, Subscription},
    consumer::Consumer,
};
use server::{
    payments::apply::{self, Applied, ChargeFacts},
    workers,
};
use uuid::Uuid;

use super::*;

/// The local NATS server the JetStream tests use.
pub fn nats_url() -> String {
    std::env::var("TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// Which bus a test runs on.
#[derive(Clone, Copy, Debug)]
pub enum OnBus {
    Postgres,
    Nats,
}

/// A test app on `on` with fast retries; on NATS its own stream and subjects, so tests
/// running at once never see each other's messages.
pub async fn spawn_chain(on: OnBus, customize: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_with(|config| {
        let events = &mut config.events;
        events.poll_every = Duration::from_millis(200);
        events.retry_base = Duration::from_millis(20);
        events.retry_cap = Duration::from_millis(200);
        events.max_attempts = 3;
        if let OnBus::Nats = on {
            let tag = Uuid::new_v4().simple().to_string();
            events.nats_url = Some(nats_url());
            events.nats_stream = format!("ONCE_TEST_{tag}");
            events.nats_subject_prefix = format!("once_test_{tag}.events");
        }
        customize(config);
    })
    .await
}

impl TestApp {
    /// The workers' context of this app: its database, configuration and a fresh bus
    /// connection (a second call is a second process's view of the same bus).
    pub async fn workers(&self) -> workers::Context {
        let metrics = Arc::new(server::metrics::Metrics::default());
        workers::Context {
            db: self.db.clone(),
            config: self.config.clone(),
            bus: bus::connect(&self.config.events.bus(), &self.db)
                .await
                .expect("bus"),
            metrics,
        }
    }

    /// Deletes this test's JetStream stream (no-op on the PostgreSQL bus).
    pub async fn drop_stream(&self) {
        let events = &self.config.events;
        if let Some(url) = &events.nats_url {
            let nats = bus::nats::NatsBus::connect(url, &events.bus())
                .await
                .expect("nats");
            nats.delete_stream().await.expect("stream deleted");
        }
    }

    /// An order for `body` (an `/api/orders` body), paid through the real apply path.
    pub async fn paid_order_for(&self, body: &str) -> Uuid {
        let response =
            post_order(&self.client, self, Some(&Uuid::new_v4().to_string()), body).await;
        assert_eq!(response.status(), 201);
        let order: serde_json::Value = response.json().await.unwrap();
        let total = order["total_cents"].as_i64().unwrap();
        let order_id: Uuid = order["id"].as_str().unwrap().parse().unwrap();
        let payment_id: Uuid = sqlx::query_scalar(
            "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
             VALUES (gen_random_uuid(), $1, 's', gen_random_uuid()::text, $2, 'EUR') RETURNING id",
        )
        .bind(order_id)
        .bind(total)
        .fetch_one(&self.db)
        .await
        .unwrap();
        let mut tx = self.db.begin().await.unwrap();
        let charge = ChargeFacts {
            charge_id: format!("ch_{}", Uuid::new_v4().simple()),
            amount_cents: total,
            currency: "EUR".into(),
        };
        assert_eq!(
            apply::charge_succeeded(&mut tx, payment_id, &charge)
                .await
                .unwrap(),
            Applied::Paid
        );
        tx.commit().await.unwrap();
        order_id
    }

    /// `n` orders for two mugs each, paid through the real apply path (which writes
    /// `order.paid` to the outbox, as a charge answer or a callback would). Returns their ids.
    pub async fn paid_orders(&self, n: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        for _ in 0..n {
            let order_id = place_order(self).await;
            let payment_id: Uuid = pending_attempt(self, &order_id).await.parse().unwrap();
            let mut tx = self.db.begin().await.unwrap();
            let applied = apply::charge_succeeded(
                &mut tx,
                payment_id,
                &ChargeFacts {
                    charge_id: format!("ch_{}", Uuid::new_v4().simple()),
                    amount_cents: 3600,
                    currency: "EUR".into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(applied, Applied::Paid);
            tx.commit().await.unwrap();
            ids.push(order_id.parse().unwrap());
        }
        ids
    }

    /// Runs statements on this test's database (as the superuser the tests connect as).
    pub async fn admin_db(&self, sql: &str) {
        sqlx::raw_sql(sql).execute(&self.db).await.expect(sql);
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.db)
            .await
            .expect(sql)
    }

    pub async fn stock_of(&self, sku: &str) -> i64 {
        sqlx::query_scalar("SELECT stock::bigint FROM products WHERE sku = $1")
            .bind(sku)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Polls `sql` (a count) until it reaches `want`, for at most `within`.
    pub async fn wait_for_count(&self, sql: &str, want: i64, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let now = self.scalar(sql).await;
            if now == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{sql}: {now} after {within:?}, expected {want}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The invariants of a fulfilled run over `orders` (each two mugs, stock 120 before):
    /// nothing lost, nothing duplicated, nothing unexpected.
    pub async fn assert_each_order_shipped_once(&self, orders: &[Uuid], mugs_before: i64) {
        let n = orders.len() as i64;
        let lost = self
            .scalar("SELECT count(*) FROM orders o WHERE o.status <> 'fulfilled' AND EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'succeeded')")
            .await;
        // Side effects beyond one per order: extra `order.fulfilled` events, and stock taken
        // more than once (in orders' worth: two mugs each).
        let shipped = self
            .scalar("SELECT count(*) FROM fulfillments WHERE status = 'shipped'")
            .await;
        let extra_events = self
            .scalar("SELECT count(*) - count(DISTINCT aggregate_id) FROM outbox_events WHERE event_type = 'order.fulfilled'")
            .await;
        let extra_stock = (mugs_before - self.stock_of("MUG-001").await - 2 * shipped) / 2;
        let duplicated = extra_events + extra_stock;
        let unexpected = self
            .scalar("SELECT count(*) FROM fulfillments f JOIN orders o ON o.id = f.order_id WHERE NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'succeeded')")
            .await;
        assert_eq!(
            (lost, duplicated, unexpected),
            (0, 0, 0),
            "lost, duplicated, unexpected"
        );
        assert_eq!(
            self.scalar("SELECT count(*) FROM fulfillments WHERE status = 'shipped'")
                .await,
            n
        );
        assert_eq!(
            self.scalar("SELECT count(*) FROM emails WHERE kind = 'order_confirmation'")
                .await,
            n
        );
        assert_eq!(self.scalar("SELECT count(*) FROM consumed_events").await, n);
        assert_eq!(
            self.scalar("SELECT count(*) FROM outbox_events WHERE event_type = 'order.fulfilled'")
                .await,
            n
        );
        assert_eq!(
            self.stock_of("MUG-001").await,
            mugs_before - 2 * n,
            "stock taken once per line"
        );
        assert_eq!(
            self.scalar("SELECT count(*) FROM dead_letters WHERE status = 'dead'")
                .await,
            0
        );
    }
}

/// Wraps a real subscription so that the real bus delivers each message `copies(id)` times:
/// the first acks are turned into immediate naks, so the bus itself sends the message again
/// (interleaved with others: reordered too).
pub struct Redelivering {
    pub inner: Box<dyn Subscription>,
}

/// Two or three deliveries per message, decided by its id.
pub fn copies(message_id: &str) -> u32 {
    2 + (message_id.bytes().map(u32::from).sum::<u32>() % 2)
}

#[async_trait]
impl Subscription for Redelivering {
    async fn fetch(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Delivery>> {
        let deliveries = self.inner.fetch(max, wait).await?;
        Ok(deliveries
            .into_iter()
            .map(|d| {
                let again = d.delivered < copies(&d.message.id);
                Delivery {
                    acker: Box::new(AckOnLast {
                        inner: d.acker,
                        again,
                    }),
                    ..d
                }
            })
            .collect())
    }
}

struct AckOnLast {
    inner: Box<dyn Acker>,
    again: bool,
}

#[async_trait]
impl Acker for AckOnLast {
    async fn ack(&self) -> anyhow::Result<()> {
        if self.again {
            self.inner.nak(Duration::ZERO).await
        } else {
            self.inner.ack().await
        }
    }
    async fn nak(&self, delay: Duration) -> anyhow::Result<()> {
        self.inner.nak(delay).await
    }
    async fn term(&self) -> anyhow::Result<()> {
        self.inner.term().await
    }
}

/// The fulfillment consumer of `context`, with every message delivered two or three times.
pub async fn redelivering_fulfillment(context: &workers::Context) -> Consumer {
    let mut consumer = context.fulfillment().await.expect("consumer");
    let inner = std::mem::replace(&mut consumer.subscription, Box::new(Nothing));
    consumer.subscription = Box::new(Redelivering { inner });
    consumer
}

/// A subscription with nothing in it (a placeholder while swapping).
struct Nothing;

#[async_trait]
impl Subscription for Nothing {
    async fn fetch(&mut self, _: usize, _: Duration) -> anyhow::Result<Vec<Delivery>> {
        Ok(Vec::new())
    }
}

/// Runs the relay and `consumer` step by step until a step finds nothing to do in either.
pub async fn drain(context: &workers::Context, consumer: &mut Consumer) {
    let relay = context.relay();
    let mut idle = 0;
    while idle < 3 {
        let published = relay.try_execute_task().await.expect("relay step");
        let consumed = consumer
            .try_execute_task(Duration::from_millis(300))
            .await
            .expect("consumer step");
        idle = if published + consumed == 0 {
            idle + 1
        } else {
            0
        };
    }
}
