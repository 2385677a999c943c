//! The statements the chain's other tests do not reach, each run against a real PostgreSQL:
//! the crate's SQL is checked at run time, by its tests, not by sqlx's compile-time macros.
//! Recording several events at once, the backlog, pruning, a nak's delay, and the dead
//! letters' whole life (record, list, retry, discard).

mod common;

use std::{sync::Arc, time::Duration};

use once_events::{
    bus::{postgres::PgBus, Bus, Delivery, Subscription},
    consumer::Consumer,
    dead_letters::{self, RetryError},
    outbox::{self, NewEvent},
    relay, Handled, Handler,
};
use sqlx::PgPool;
use uuid::Uuid;

use common::{fresh_db, message, record_events, scalar, Counted, Recorder, SUBJECT};

#[tokio::test]
async fn record_all_writes_each_event_in_order_and_the_backlog_counts_them() {
    let (db, _database) = fresh_db().await;
    let empty = outbox::backlog(&db).await.unwrap();
    assert_eq!((empty.unpublished, empty.oldest_secs), (0, 0.0));

    let aggregate = Uuid::new_v4();
    let events = [
        NewEvent {
            aggregate_type: "order",
            aggregate_id: aggregate,
            event_type: "order.created",
            payload: serde_json::json!({ "n": 1 }),
        },
        NewEvent {
            aggregate_type: "order",
            aggregate_id: aggregate,
            event_type: "order.paid",
            payload: serde_json::json!({ "n": 2 }),
        },
    ];
    let mut tx = db.begin().await.unwrap();
    let ids = outbox::record_all(&mut tx, &events).await.unwrap();
    tx.commit().await.unwrap();

    assert_eq!(ids.len(), 2);
    for (id, event) in ids.iter().zip(&events) {
        let (aggregate_type, aggregate_id, event_type, payload): (
            String,
            Uuid,
            String,
            serde_json::Value,
        ) = sqlx::query_as(
            "SELECT aggregate_type, aggregate_id, event_type, payload
               FROM outbox_events WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
        assert_eq!(
            (
                aggregate_type.as_str(),
                aggregate_id,
                event_type.as_str(),
                &payload
            ),
            (
                event.aggregate_type,
                event.aggregate_id,
                event.event_type,
                &event.payload
            )
        );
    }
    let backlog = outbox::backlog(&db).await.unwrap();
    assert_eq!(backlog.unpublished, 2);
    assert!(backlog.oldest_secs >= 0.0);
}

/// The Recorder's subscription on the PostgreSQL bus of `db`.
async fn subscribe(db: &PgPool) -> (Arc<dyn Bus>, Box<dyn Subscription>) {
    let bus: Arc<dyn Bus> = Arc::new(PgBus::new(db.clone(), Duration::from_millis(100)));
    let spec = Consumer::spec(&Recorder, Duration::from_secs(30));
    let subscription = bus.subscribe(&spec).await.unwrap();
    (bus, subscription)
}

#[tokio::test]
async fn pruning_deletes_only_events_published_and_messages_settled_before_the_retention() {
    let (db, _database) = fresh_db().await;
    let (bus, mut subscription) = subscribe(&db).await;
    let counted = Arc::new(Counted::default());
    let relay = common::relay(&db, bus, &counted);

    record_events(&db, 3).await;
    assert_eq!(relay.try_execute_task().await.unwrap(), 3);
    let deliveries = subscription
        .fetch(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 3);
    // Two settled, one still in a consumer's hands.
    subscription
        .ack_all(&[&deliveries[0], &deliveries[1]])
        .await
        .unwrap();
    // Published two hours ago; one more event, published just now, and one not yet.
    sqlx::query("UPDATE outbox_events SET published_at = now() - interval '2 hours'")
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("UPDATE bus_messages SET published_at = now() - interval '2 hours'")
        .execute(&db)
        .await
        .unwrap();
    record_events(&db, 1).await;
    assert_eq!(relay.try_execute_task().await.unwrap(), 1);
    record_events(&db, 1).await;

    let pruned = relay::prune(&db, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(pruned, 3, "the events published two hours ago");
    assert_eq!(scalar(&db, "SELECT count(*) FROM outbox_events").await, 2);
    let unsettled = Uuid::parse_str(&deliveries[2].message.id).unwrap();
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM bus_messages ORDER BY published_at")
        .fetch_all(&db)
        .await
        .unwrap();
    assert_eq!(left.len(), 2, "the unsettled message and the recent one");
    assert_eq!(left[0], unsettled);
}

#[tokio::test]
async fn a_nak_hides_a_delivery_for_its_delay() {
    let (db, _database) = fresh_db().await;
    let (bus, mut subscription) = subscribe(&db).await;
    bus.publish(&message(serde_json::json!({}))).await.unwrap();
    let deliveries = subscription
        .fetch(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    deliveries[0]
        .acker
        .nak(Duration::from_secs(60))
        .await
        .unwrap();
    let hidden = scalar(
        &db,
        "SELECT count(*) FROM bus_deliveries
          WHERE visible_at > now() + interval '50 seconds' AND settled_at IS NULL",
    )
    .await;
    assert_eq!(hidden, 1);
    let again = subscription
        .fetch(10, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(again.is_empty(), "not visible again before its delay");

    deliveries[0].acker.nak(Duration::ZERO).await.unwrap();
    let again = subscription
        .fetch(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!((again.len(), again[0].delivered), (1, 2));
}

/// Publishes a message with `payload` and fetches its delivery.
async fn deliver(
    bus: &dyn Bus,
    subscription: &mut Box<dyn Subscription>,
    payload: serde_json::Value,
) -> Delivery {
    bus.publish(&message(payload)).await.unwrap();
    let mut deliveries = subscription.fetch(1, Duration::from_secs(1)).await.unwrap();
    deliveries.pop().expect("a delivery")
}

/// The dead letter of `message_id`: its id, status, error and deliveries.
async fn letter(db: &PgPool, message_id: &str) -> (Uuid, String, String, i32) {
    let letters = dead_letters::list(db).await.unwrap();
    let letter = letters
        .iter()
        .find(|l| l.message_id == message_id)
        .expect("a dead letter");
    (
        letter.id,
        letter.status.clone(),
        letter.error.clone(),
        letter.deliveries,
    )
}

#[tokio::test]
async fn a_dead_letter_is_recorded_once_listed_retried_once_and_discarded() {
    let (db, _database) = fresh_db().await;
    let (bus, mut subscription) = subscribe(&db).await;
    let handler: Arc<dyn Handler> = Arc::new(Recorder);

    // Recorded, then recorded again (it died again): one letter, with the last error.
    let good = deliver(bus.as_ref(), &mut subscription, serde_json::json!({})).await;
    dead_letters::record(&db, "recorder", &good, "first")
        .await
        .unwrap();
    dead_letters::record(&db, "recorder", &good, "second")
        .await
        .unwrap();
    let (id, status, error, deliveries) = letter(&db, &good.message.id).await;
    assert_eq!(
        (status.as_str(), error.as_str(), deliveries),
        ("dead", "second", 1)
    );
    let listed = dead_letters::list(&db).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].consumer.as_str(), listed[0].subject.as_str()),
        ("recorder", SUBJECT)
    );

    // Retried: applied once; a second retry finds nothing to do, nor does a discard.
    let handled = dead_letters::retry(&db, &handler, id).await.unwrap();
    assert_eq!(handled, Handled::Done);
    assert_eq!(letter(&db, &good.message.id).await.1, "retried");
    assert_eq!(scalar(&db, "SELECT count(*) FROM effects").await, 1);
    assert!(matches!(
        dead_letters::retry(&db, &handler, id).await,
        Err(RetryError::NotDead(_))
    ));
    assert!(!dead_letters::discard(&db, id).await.unwrap());

    // Another consumer's letter is not retried, and stays dead.
    let other = deliver(bus.as_ref(), &mut subscription, serde_json::json!({})).await;
    dead_letters::record(&db, "someone-else", &other, "boom")
        .await
        .unwrap();
    let (id, ..) = letter(&db, &other.message.id).await;
    assert!(matches!(
        dead_letters::retry(&db, &handler, id).await,
        Err(RetryError::WrongConsumer(..))
    ));
    assert_eq!(letter(&db, &other.message.id).await.1, "dead");
    assert!(dead_letters::discard(&db, id).await.unwrap());
    assert_eq!(letter(&db, &other.message.id).await.1, "discarded");

    // A retry that fails again leaves the letter dead, with the new error.
    let poison = deliver(
        bus.as_ref(),
        &mut subscription,
        serde_json::json!({ "poison": true }),
    )
    .await;
    dead_letters::record(&db, "recorder", &poison, "old")
        .await
        .unwrap();
    let (id, ..) = letter(&db, &poison.message.id).await;
    assert!(matches!(
        dead_letters::retry(&db, &handler, id).await,
        Err(RetryError::FailedAgain(_))
    ));
    let (_, status, error, _) = letter(&db, &poison.message.id).await;
    assert_eq!(
        (status.as_str(), error.as_str()),
        ("dead", "this event is poison")
    );
}
