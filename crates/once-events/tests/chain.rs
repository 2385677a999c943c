//! The chain against a real PostgreSQL, on a fresh database migrated with the crate's own
//! migration: consume_once's guarantee, the PostgreSQL bus's registration and dedup, and a
//! consumer run end to end.

mod common;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use once_events::{
    apply_in_one_tx,
    bus::{postgres::PgBus, Bus, ConsumerSpec, Published},
    consume_all, consume_once,
    outbox::{self, Event},
    Counter, Handled, Handler, HandlerError,
};
use sqlx::PgConnection;
use uuid::Uuid;

use common::{consumer, fresh_db, relay, scalar, Counted, Recorder, SUBJECT};

#[tokio::test]
async fn an_event_is_consumed_once_per_consumer_and_only_by_a_committed_transaction() {
    let (db, _database) = fresh_db().await;
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
    let (db, _database) = fresh_db().await;
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

#[tokio::test]
async fn an_event_republished_and_handled_again_takes_effect_once() {
    let (db, _database) = fresh_db().await;
    let counted = Arc::new(Counted::default());
    let bus: Arc<dyn Bus> = Arc::new(PgBus::new(db.clone(), Duration::from_millis(100)));
    let mut consumer = consumer(&db, bus.as_ref(), &counted).await;
    let relay = relay(&db, bus, &counted);

    let mut tx = db.begin().await.unwrap();
    let id = outbox::record(
        &mut tx,
        "thing",
        Uuid::new_v4(),
        SUBJECT,
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
        event_type: SUBJECT.into(),
        aggregate_type: "thing".into(),
        aggregate_id: Uuid::new_v4(),
        payload: serde_json::json!({}),
        created_at: chrono::Utc::now(),
    };
    let again = apply_in_one_tx(&db, &Recorder, &[&event]).await;
    assert_eq!(again.unwrap(), [Handled::Duplicate]);

    // Twice in one batch (a republish fetched with the original): applied once.
    let twice = Event {
        id: Uuid::new_v4(),
        ..event
    };
    let batch = apply_in_one_tx(&db, &Recorder, &[&twice, &twice]).await;
    assert_eq!(batch.unwrap(), [Handled::Done, Handled::Duplicate]);
    assert_eq!(scalar(&db, "SELECT count(*) FROM effects").await, 2);

    assert_eq!(
        (
            counted.of(Counter::Published),
            counted.of(Counter::Republished)
        ),
        (1, 1)
    );
}

/// A handler that runs a statement that fails, and carries on as if it had not.
struct Swallower;

#[async_trait]
impl Handler for Swallower {
    fn name(&self) -> &'static str {
        "swallower"
    }

    fn subject(&self) -> &'static str {
        SUBJECT
    }

    async fn apply(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError> {
        let _ignored = sqlx::query("SELECT 1 / 0").execute(&mut *tx).await;
        Recorder.apply(tx, events).await.or(Ok(()))
    }
}

#[tokio::test]
async fn a_handler_that_swallows_a_failed_statement_gets_no_ack_for_a_batch_never_committed() {
    let (db, _database) = fresh_db().await;
    // The last event of a batch (here the only one): no statement of the runtime's follows
    // the handler's to fail in the aborted transaction, but the commit.
    let event = Event::from_message(&common::message(serde_json::json!({}))).unwrap();
    let applied = apply_in_one_tx(&db, &Swallower, &[&event]).await;
    assert!(applied.is_err(), "reported as failed: {applied:?}");
    assert_eq!(scalar(&db, "SELECT count(*) FROM consumed_events").await, 0);
}

#[tokio::test]
async fn consume_all_says_first_once_per_id_in_the_order_given() {
    let (db, _database) = fresh_db().await;
    let (a, b, earlier) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let mut tx = db.begin().await.unwrap();
    assert!(consume_once(&mut tx, "mailer", earlier).await.unwrap());
    let first = consume_all(&mut tx, "mailer", &[b, earlier, a, b])
        .await
        .unwrap();
    assert_eq!(first, [true, false, true, false]);
    tx.commit().await.unwrap();
    let consumed = scalar(&db, "SELECT count(*) FROM consumed_events").await;
    assert_eq!(consumed, 3);
}
