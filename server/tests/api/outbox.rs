//! The outbox relay: what it publishes, when it wakes, what it keeps.

use std::time::Duration;

use once_events::{outbox, relay};
use sqlx::Connection;

use crate::helpers::*;

#[tokio::test]
async fn an_event_committed_after_later_ones_were_published_is_still_published() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    let context = app.workers().await;
    // A transaction writes its event first and commits last (ids and sequence values
    // commit out of order); meanwhile later events are written and published.
    let mut slow = sqlx::PgConnection::connect(&app.config.database_url)
        .await
        .unwrap();
    let mut tx = slow.begin().await.unwrap();
    let early = outbox::record(
        &mut tx,
        "order",
        uuid::Uuid::new_v4(),
        "order.created",
        serde_json::json!({}),
    )
    .await
    .unwrap();
    app.paid_orders(2).await;
    assert_eq!(context.relay().try_execute_task().await.unwrap(), 4);
    tx.commit().await.unwrap();

    assert_eq!(
        context.relay().try_execute_task().await.unwrap(),
        1,
        "the late event is not skipped"
    );
    let published: bool =
        sqlx::query_scalar("SELECT published_at IS NOT NULL FROM outbox_events WHERE id = $1")
            .bind(early)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(published);
    assert_eq!(app.scalar("SELECT count(*) FROM bus_messages").await, 5);
}

#[tokio::test]
async fn a_notification_wakes_the_relay_long_before_its_next_poll() {
    let app = spawn_chain(OnBus::Postgres, |config| {
        config.events.poll_every = Duration::from_secs(60);
    })
    .await;
    let context = app.workers().await;
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(context.relay().run(
        Duration::from_secs(60),
        Duration::from_secs(3600),
        stop.clone(),
    ));
    // Let the relay finish its first (empty) pass and start listening.
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.paid_orders(1).await;
    app.wait_for_count(
        "SELECT count(*) FROM outbox_events WHERE published_at IS NOT NULL",
        2,
        Duration::from_secs(10),
    )
    .await;
    stop.cancel();
}

#[tokio::test]
async fn published_events_and_settled_messages_are_pruned_after_the_retention() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    app.paid_orders(2).await;
    drain(&context, &mut consumer).await;
    app.paid_orders(1).await; // two more events, not yet published
    assert_eq!(
        relay::prune(&app.db, Duration::from_secs(3600))
            .await
            .unwrap(),
        0,
        "all too young"
    );
    app.admin_db("UPDATE outbox_events SET published_at = published_at - interval '2 hours' WHERE published_at IS NOT NULL;
                  UPDATE bus_messages SET published_at = published_at - interval '2 hours';")
        .await;

    let pruned = relay::prune(&app.db, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(pruned, 6, "2 orders × (created, paid, fulfilled)");
    assert_eq!(
        app.scalar("SELECT count(*) FROM outbox_events WHERE published_at IS NULL")
            .await,
        2
    );
    assert_eq!(
        app.count("outbox_events").await,
        2,
        "unpublished events are kept"
    );
    assert_eq!(
        app.count("bus_messages").await,
        0,
        "settled messages go too"
    );
}

#[tokio::test]
async fn metrics_show_the_outbox_lag_and_the_chain_counters() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    app.paid_orders(1).await;
    let metrics = app.metrics_text().await;
    assert!(metrics.contains("once_outbox_unpublished 2\n"), "{metrics}");
    assert!(metrics.contains("once_outbox_oldest_unpublished_seconds "));
    for name in [
        "once_consumer_duplicates_skipped_total",
        "once_consumer_retries_total",
        "once_dead_letters 0",
    ] {
        assert!(metrics.contains(name), "{name}");
    }
}
