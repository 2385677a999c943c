//! Dead letters: a handler that keeps failing is retried, then kept with its last error; a
//! malformed message at once; a message whose dead letter cannot be written is kept on the
//! bus; and a retry, however many tabs click, runs once.

use std::time::Duration;

use sqlx::Connection;

use once_events::{
    bus::Message,
    dead_letters::{self, RetryError},
    Handler,
};
use server::fulfillment::Fulfillment;

use crate::helpers::*;

const MUGS: i64 = 120;

#[tokio::test]
async fn a_failing_handler_is_retried_then_dead_lettered_and_a_retry_after_the_fix_ships_it() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    // A cause outside the message: fulfillments cannot be written (as a bad deploy would).
    app.admin_db(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'warehouse offline'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON fulfillments FOR EACH ROW EXECUTE FUNCTION refuse();",
    )
    .await;
    let orders = app.paid_orders(1).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    context.relay().try_execute_task().await.unwrap();
    for _ in 0..40 {
        consumer
            .try_execute_task(Duration::from_millis(100))
            .await
            .unwrap();
        if app.count("dead_letters").await > 0 {
            break;
        }
    }
    let (error, deliveries): (String, i32) =
        sqlx::query_as("SELECT error, deliveries FROM dead_letters")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(error.contains("warehouse offline"), "{error}");
    assert_eq!(deliveries, 3, "dead after CONSUMER_MAX_ATTEMPTS tries");
    assert_eq!(
        context
            .metrics
            .retries
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // The bus lets it go: no further deliveries.
    assert_eq!(
        consumer
            .try_execute_task(Duration::from_millis(300))
            .await
            .unwrap(),
        0
    );
    assert_eq!(app.count("fulfillments").await, 0);

    app.admin_db("DROP TRIGGER refuse ON fulfillments").await;
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM dead_letters")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let handler: std::sync::Arc<dyn Handler> = std::sync::Arc::new(Fulfillment);
    dead_letters::retry(&app.db, &handler, id)
        .await
        .expect("the retry ships it");
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    assert!(matches!(
        dead_letters::retry(&app.db, &handler, id).await,
        Err(RetryError::NotDead(_))
    ));
}

async fn a_malformed_message_is_a_dead_letter_at_once(on: OnBus) {
    let app = spawn_chain(on, |_| {}).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let junk = Message {
        id: id.clone(),
        subject: "order.paid".into(),
        body: b"{not json".to_vec(),
    };
    context.bus.publish(&junk).await.unwrap();
    assert_eq!(
        consumer
            .try_execute_task(Duration::from_secs(2))
            .await
            .unwrap(),
        1
    );

    let (message_id, error, deliveries): (String, String, i32) =
        sqlx::query_as("SELECT message_id, error, deliveries FROM dead_letters")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(message_id, id);
    assert!(error.starts_with("malformed event"), "{error}");
    assert_eq!(deliveries, 1, "poison is not retried");
    assert_eq!(
        consumer
            .try_execute_task(Duration::from_millis(500))
            .await
            .unwrap(),
        0,
        "and not redelivered"
    );
    assert_eq!(app.count("consumed_events").await, 0);
    app.drop_stream().await;
}

#[tokio::test]
async fn a_malformed_message_is_a_dead_letter_at_once_on_postgres() {
    a_malformed_message_is_a_dead_letter_at_once(OnBus::Postgres).await;
}

#[tokio::test]
async fn a_malformed_message_is_a_dead_letter_at_once_on_nats() {
    a_malformed_message_is_a_dead_letter_at_once(OnBus::Nats).await;
}

/// A failover holds the database read-only for a while. A consumer that meets it waits for
/// the database to take writes again instead of fetching on: each fetch would send the
/// message back once more, and enough of those read as a message that kills its consumer
/// (written off "without an answer", a dead letter of an event that did nothing wrong).
#[tokio::test]
async fn an_outage_costs_a_message_one_delivery_not_its_dead_letter() {
    let app = spawn_chain(OnBus::Nats, |_| {}).await;
    let orders = app.paid_orders(1).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    context.relay().try_execute_task().await.unwrap();
    let db = app.db_name.clone();
    app.admin(&format!(
        "ALTER DATABASE {db} SET default_transaction_read_only = on"
    ))
    .await;
    app.kill_connections().await;
    let failover = Duration::from_millis(1500);
    let reopen = tokio::spawn(async move {
        tokio::time::sleep(failover).await;
        let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", admin_url()))
            .await
            .unwrap();
        for sql in [
            format!("ALTER DATABASE {db} RESET default_transaction_read_only"),
            format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'"
            ),
        ] {
            sqlx::query(&sql).execute(&mut admin).await.unwrap();
        }
    });
    // Fetching in a loop through the outage and after it: twice the tries (3) would be
    // spent in the first few hundred milliseconds without the wait.
    let started = std::time::Instant::now();
    while started.elapsed() < failover * 2 {
        let _ = consumer.try_execute_task(Duration::from_millis(50)).await;
        if app.count("consumed_events").await > 0 {
            break;
        }
    }
    reopen.await.unwrap();
    for _ in 0..40 {
        consumer
            .try_execute_task(Duration::from_millis(100))
            .await
            .unwrap();
        if app.count("fulfillments").await > 0 {
            break;
        }
    }
    assert_eq!(
        app.count("dead_letters").await,
        0,
        "no dead letter for an outage"
    );
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    app.drop_stream().await;
}

/// Makes inserts into `table` fail (as a bad deploy or a full disk would) until `allow`.
async fn refuse_inserts(app: &TestApp, table: &str) {
    app.admin_db(&format!(
        "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION refuse();"
    ))
    .await;
}

async fn allow_inserts(app: &TestApp, table: &str) {
    app.admin_db(&format!("DROP TRIGGER refuse ON {table}"))
        .await;
}

async fn a_message_whose_dead_letter_cannot_be_written_is_kept(on: OnBus) {
    let app = spawn_chain(on, |_| {}).await;
    refuse_inserts(&app, "fulfillments").await;
    refuse_inserts(&app, "dead_letters").await;
    let orders = app.paid_orders(1).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    context.relay().try_execute_task().await.unwrap();
    // Far past the tries (3), and past twice the tries (when it is written off unanswered).
    let mut deliveries = 0;
    for _ in 0..80 {
        deliveries += consumer
            .try_execute_task(Duration::from_millis(100))
            .await
            .unwrap();
        if deliveries >= 8 {
            break;
        }
    }
    assert!(
        deliveries >= 8,
        "still delivered after its tries: {deliveries}"
    );
    assert_eq!(app.count("dead_letters").await, 0);

    // Once the database takes writes again, the message is still there to be handled.
    allow_inserts(&app, "dead_letters").await;
    allow_inserts(&app, "fulfillments").await;
    for _ in 0..80 {
        consumer
            .try_execute_task(Duration::from_millis(100))
            .await
            .unwrap();
        if app.count("dead_letters").await > 0 {
            break;
        }
    }
    let (error, status): (String, String) =
        sqlx::query_as("SELECT error, status FROM dead_letters")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(status, "dead");
    assert!(
        error.contains("refused") || error.contains("without an answer"),
        "{error}"
    );
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM dead_letters")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let handler: std::sync::Arc<dyn Handler> = std::sync::Arc::new(Fulfillment);
    dead_letters::retry(&app.db, &handler, id).await.unwrap();
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    app.drop_stream().await;
}

#[tokio::test]
async fn a_message_whose_dead_letter_cannot_be_written_is_kept_on_postgres() {
    a_message_whose_dead_letter_cannot_be_written_is_kept(OnBus::Postgres).await;
}

#[tokio::test]
async fn a_message_whose_dead_letter_cannot_be_written_is_kept_on_nats() {
    a_message_whose_dead_letter_cannot_be_written_is_kept(OnBus::Nats).await;
}

#[tokio::test]
async fn a_dead_letter_is_retried_once_however_many_tabs_click_and_a_discard_meanwhile_does_nothing(
) {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    refuse_inserts(&app, "fulfillments").await;
    let orders = app.paid_orders(1).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    context.relay().try_execute_task().await.unwrap();
    for _ in 0..40 {
        consumer
            .try_execute_task(Duration::from_millis(100))
            .await
            .unwrap();
        if app.count("dead_letters").await > 0 {
            break;
        }
    }
    allow_inserts(&app, "fulfillments").await;
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM dead_letters")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let handler: std::sync::Arc<dyn Handler> = std::sync::Arc::new(Fulfillment);
    let (a, b, discarded) = tokio::join!(
        dead_letters::retry(&app.db, &handler, id),
        dead_letters::retry(&app.db, &handler, id),
        dead_letters::discard(&app.db, id),
    );
    let retried = [a.is_ok(), b.is_ok()].into_iter().filter(|ok| *ok).count();
    let discarded = discarded.unwrap();
    assert_eq!(
        retried + usize::from(discarded),
        1,
        "exactly one of the clicks acts"
    );
    let status: String = sqlx::query_scalar("SELECT status FROM dead_letters")
        .fetch_one(&app.db)
        .await
        .unwrap();
    if discarded {
        assert_eq!(status, "discarded");
        assert_eq!(
            app.count("fulfillments").await,
            0,
            "a discarded letter is not run"
        );
    } else {
        assert_eq!(status, "retried");
        app.assert_each_order_shipped_once(&orders, MUGS).await;
    }
}
