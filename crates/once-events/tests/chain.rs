//! The chain against a real PostgreSQL, on a fresh database migrated with the crate's own
//! migration: consume_once's guarantee, the PostgreSQL bus's registration and dedup, and a
//! consumer run end to end.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use async_trait::async_trait;
use once_events::{
    bus::{postgres::PgBus, Bus, ConsumerSpec, Published},
    consume_once,
    consumer::{Consumer, RetryPolicy},
    outbox::{self, Event},
    relay::Relay,
    Counter, Counters, Handled, Handler, HandlerError,
};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

/// A fresh database with the crate's migration applied. Named like the shop's test
/// databases, so that scripts/test clears any a killed run left behind.
async fn fresh_db() -> PgPool {
    let admin = std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432".into());
    let name = format!("once_test_events_{}", Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(&format!("{admin}/postgres"))
        .await
        .expect("admin connection");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("database created");
    let db = PgPool::connect(&format!("{admin}/{name}"))
        .await
        .expect("connection");
    once_events::MIGRATOR.run(&db).await.expect("migrated");
    db
}

#[tokio::test]
async fn an_event_is_consumed_once_per_consumer_and_only_by_a_committed_transaction() {
    let db = fresh_db().await;
    let event = Uuid::new_v4();

    let mut rolled_back = db.begin().await.unwrap();
    assert!(consume_once(&mut rolled_back, "mailer", event)
        .await
        .unwrap());
    rolled_back.rollback().await.unwrap();

    let mut tx = db.begin().await.unwrap();
    assert!(
        consume_once(&mut tx, "mailer", event).await.unwrap(),
        "the rollback left nothing"
    );
    // A second consumer of the same event at the same time waits for the first to commit.
    let racer = tokio::spawn({
        let db = db.clone();
        async move {
            let mut tx = db.begin().await.unwrap();
            let first = consume_once(&mut tx, "mailer", event).await.unwrap();
            tx.commit().await.unwrap();
            first
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx.commit().await.unwrap();
    assert!(!racer.await.unwrap(), "the racer saw the committed record");

    let mut tx = db.begin().await.unwrap();
    assert!(!consume_once(&mut tx, "mailer", event).await.unwrap());
    assert!(
        consume_once(&mut tx, "billing", event).await.unwrap(),
        "each consumer consumes the event once"
    );
    tx.commit().await.unwrap();
}

fn spec(name: &'static str, subject: &'static str) -> ConsumerSpec {
    ConsumerSpec {
        name,
        subject,
        ack_wait: Duration::from_secs(30),
    }
}

#[tokio::test]
async fn the_postgres_bus_registers_a_consumer_on_subscribe_and_stores_a_message_once() {
    let db = fresh_db().await;
    let bus = PgBus::new(db.clone(), Duration::from_millis(100));
    let mut subscription = bus.subscribe(&spec("audit", "order.paid")).await.unwrap();
    // A second subscribe (another process) finds it registered.
    bus.subscribe(&spec("audit", "order.paid")).await.unwrap();
    let taken = bus.subscribe(&spec("audit", "order.created")).await;
    assert!(taken.is_err(), "a name is registered on one subject");

    let message = Event {
        id: Uuid::new_v4(),
        event_type: "order.paid".into(),
        aggregate_type: "order".into(),
        aggregate_id: Uuid::new_v4(),
        payload: serde_json::json!({}),
        created_at: chrono::Utc::now(),
    }
    .to_message();
    assert_eq!(bus.publish(&message).await.unwrap(), Published::New);
    assert_eq!(bus.publish(&message).await.unwrap(), Published::Duplicate);

    let deliveries = subscription
        .fetch(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(
        (&deliveries[0].message, deliveries[0].delivered),
        (&message, 1)
    );
    deliveries[0].acker.ack().await.unwrap();
    let again = subscription
        .fetch(10, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(again.is_empty(), "an acked message is not delivered again");
}

/// Counts what the chain reports, as an app's metrics would.
#[derive(Default)]
struct Counted {
    published: AtomicU64,
    republished: AtomicU64,
    duplicates_skipped: AtomicU64,
}

impl Counters for Counted {
    fn count(&self, counter: Counter) {
        let counted = match counter {
            Counter::Published => &self.published,
            Counter::Republished => &self.republished,
            Counter::DuplicateSkipped => &self.duplicates_skipped,
            _ => return,
        };
        counted.fetch_add(1, Ordering::Relaxed);
    }
}

/// A handler whose effect is a row in `effects`, applied under consume_once.
struct Recorder {
    db: PgPool,
}

#[async_trait]
impl Handler for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn subject(&self) -> &'static str {
        "thing.happened"
    }

    async fn handle(&self, event: &Event) -> Result<Handled, HandlerError> {
        let mut tx = self.db.begin().await?;
        if !consume_once(&mut tx, self.name(), event.id).await? {
            return Ok(Handled::Duplicate);
        }
        sqlx::query("INSERT INTO effects (event_id) VALUES ($1)")
            .bind(event.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Handled::Done)
    }
}

#[tokio::test]
async fn an_event_republished_and_handled_again_takes_effect_once() {
    let db = fresh_db().await;
    sqlx::query("CREATE TABLE effects (event_id uuid NOT NULL)")
        .execute(&db)
        .await
        .unwrap();
    let counted = Arc::new(Counted::default());
    let bus: Arc<dyn Bus> = Arc::new(PgBus::new(db.clone(), Duration::from_millis(100)));
    let handler: Arc<dyn Handler> = Arc::new(Recorder { db: db.clone() });
    let mut consumer = Consumer {
        db: db.clone(),
        subscription: bus
            .subscribe(&Consumer::spec(handler.as_ref(), Duration::from_secs(30)))
            .await
            .unwrap(),
        handler: handler.clone(),
        policy: RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(100),
        },
        metrics: counted.clone(),
        pause_before_ack: Duration::ZERO,
    };
    let relay = Relay {
        db: db.clone(),
        bus,
        metrics: counted.clone(),
    };

    let mut tx = db.begin().await.unwrap();
    let id = outbox::record(
        &mut tx,
        "thing",
        Uuid::new_v4(),
        "thing.happened",
        serde_json::json!({}),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(relay.try_execute_task().await.unwrap(), 1);
    // As if the relay had died before marking it: published again, recognised by the bus.
    sqlx::query("UPDATE outbox_events SET published_at = NULL")
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(relay.try_execute_task().await.unwrap(), 1);
    assert_eq!(
        consumer
            .try_execute_task(Duration::from_secs(1))
            .await
            .unwrap(),
        1
    );

    // Delivered again some other way (a dead letter's retry, another bus): nothing twice.
    let event = Event {
        id,
        event_type: "thing.happened".into(),
        aggregate_type: "thing".into(),
        aggregate_id: Uuid::new_v4(),
        payload: serde_json::json!({}),
        created_at: chrono::Utc::now(),
    };
    assert_eq!(handler.handle(&event).await.unwrap(), Handled::Duplicate);

    let effects: i64 = sqlx::query_scalar("SELECT count(*) FROM effects")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(effects, 1);
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    assert_eq!(
        (load(&counted.published), load(&counted.republished)),
        (1, 1)
    );
}
