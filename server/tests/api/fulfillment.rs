//! The fulfillment chain: every paid order ships exactly once (stock taken once, one
//! shipment, one email) while every message arrives two or three times, on both buses.
//! What happens to messages that fail is in `dead_letters.rs`.

use std::time::Duration;

use crate::helpers::*;

const N: usize = 12;
const MUGS: i64 = 120;

async fn every_paid_order_ships_once_under_redelivery(on: OnBus) {
    let app = spawn_chain(on, |_| {}).await;
    let orders = app.paid_orders(N).await;
    let context = app.workers().await;
    let mut consumer = redelivering_fulfillment(&context).await;
    // The relay publishes everything, then (as if it died before marking its batch) again.
    // Each order wrote order.created and order.paid.
    assert_eq!(context.relay().try_execute_task().await.unwrap(), 2 * N);
    sqlx::query("UPDATE outbox_events SET published_at = NULL")
        .execute(&app.db)
        .await
        .unwrap();
    drain(&context, &mut consumer).await;

    app.assert_each_order_shipped_once(&orders, MUGS).await;
    let metrics = &context.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        load(&metrics.events_republished),
        2 * N as u64,
        "the bus recognised every republish"
    );
    assert!(
        load(&metrics.deliveries) >= 2 * N as u64,
        "every message came at least twice"
    );
    assert_eq!(
        load(&metrics.duplicates_skipped),
        load(&metrics.deliveries) - N as u64,
        "every delivery but the first of each event did nothing"
    );
    app.drop_stream().await;
}

#[tokio::test]
async fn every_paid_order_ships_once_though_each_message_comes_two_or_three_times_on_postgres() {
    every_paid_order_ships_once_under_redelivery(OnBus::Postgres).await;
}

#[tokio::test]
async fn every_paid_order_ships_once_though_each_message_comes_two_or_three_times_on_nats() {
    every_paid_order_ships_once_under_redelivery(OnBus::Nats).await;
}

async fn two_relays_and_two_consumers_at_once(on: OnBus) {
    let app = spawn_chain(on, |_| {}).await;
    let orders = app.paid_orders(N).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut contexts = Vec::new();
    for _ in 0..2 {
        let context = app.workers().await;
        let poll = context.config.events.poll_every;
        tokio::spawn(
            context
                .relay()
                .run(poll, Duration::from_secs(3600), stop.clone()),
        );
        tokio::spawn(
            redelivering_fulfillment(&context)
                .await
                .run(poll, stop.clone()),
        );
        contexts.push(context);
    }
    app.wait_for_count(
        "SELECT count(*) FROM orders WHERE status = 'fulfilled'",
        N as i64,
        Duration::from_secs(30),
    )
    .await;
    // Let the remaining redeliveries arrive and be skipped before counting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    let republished: u64 = contexts
        .iter()
        .map(|c| {
            c.metrics
                .events_republished
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .sum();
    assert_eq!(
        republished, 0,
        "SKIP LOCKED: no event was claimed by both relays"
    );
    app.drop_stream().await;
}

#[tokio::test]
async fn two_relays_and_two_consumers_at_once_on_postgres() {
    two_relays_and_two_consumers_at_once(OnBus::Postgres).await;
}

#[tokio::test]
async fn two_relays_and_two_consumers_at_once_on_nats() {
    two_relays_and_two_consumers_at_once(OnBus::Nats).await;
}

#[tokio::test]
async fn an_order_without_stock_is_backordered_once_without_a_retry_storm() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    app.admin_db("UPDATE products SET stock = 3 WHERE sku = 'MUG-001'")
        .await;
    app.paid_orders(2).await;
    let context = app.workers().await;
    let mut consumer = redelivering_fulfillment(&context).await;
    drain(&context, &mut consumer).await;

    assert_eq!(
        app.stock_of("MUG-001").await,
        1,
        "two mugs taken once, never below zero"
    );
    // Whichever order came first shipped; the other waits for stock.
    let statuses: Vec<(String, String)> = sqlx::query_as(
        "SELECT o.status, f.status FROM orders o JOIN fulfillments f ON f.order_id = o.id ORDER BY f.status DESC",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        statuses,
        [
            ("fulfilled".into(), "shipped".into()),
            ("paid".into(), "backordered".into())
        ]
    );
    assert_eq!(
        app.count("emails").await,
        1,
        "no confirmation for what did not ship"
    );
    let outcomes: Vec<String> =
        sqlx::query_scalar("SELECT outcome FROM consumed_events ORDER BY outcome")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(outcomes, ["backordered", "shipped"]);
    let deliveries: i64 = app
        .scalar("SELECT sum(deliveries)::bigint FROM bus_deliveries")
        .await;
    assert!(
        deliveries <= 2 * 3,
        "each message came its 2 or 3 times, no more: {deliveries}"
    );
    assert_eq!(
        context
            .metrics
            .retries
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no retries"
    );
    assert_eq!(app.count("dead_letters").await, 0);
}

#[tokio::test]
async fn the_order_shows_its_shipment_and_its_confirmation_email_to_its_shopper_only() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    let order_id = app.paid_orders(1).await[0];
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    drain(&context, &mut consumer).await;
    assert_eq!(
        context.mailer().unwrap().try_execute_task().await.unwrap(),
        1
    );

    let order = app
        .get_json(&app.client, &format!("/api/orders/{order_id}"))
        .await;
    assert_eq!(order["status"], "fulfilled");
    let shipment = order["fulfillment"]["shipment_no"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(shipment.starts_with("S-"), "{shipment}");
    let email_url = order["fulfillment"]["email_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let email = app.get_text(&app.client, &email_url).await;
    let order_no = order["order_no"].as_str().unwrap();
    for shown in [order_no, shipment.as_str(), "Stoneware mug", "€36.00"] {
        assert!(email.contains(shown), "the email shows {shown}");
    }
    let status: String = sqlx::query_scalar("SELECT status FROM emails")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(
        status, "kept",
        "without SMTP_URL the email is kept in the database"
    );

    let stranger = shopper();
    app.open_session(&stranger).await;
    let response = stranger.get(app.url(&email_url)).send().await.unwrap();
    assert_eq!(response.status(), 404, "another shopper cannot read it");
}

#[tokio::test]
async fn an_order_is_served_whole_or_not_at_all() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    app.admin_db("UPDATE products SET stock = 1 WHERE sku = 'LAMP-008'")
        .await;
    app.paid_order_for(
        r#"{"items":[{"sku":"MUG-001","quantity":2},{"sku":"LAMP-008","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
    )
    .await;
    app.admin_db("UPDATE products SET stock = 0 WHERE sku = 'LAMP-008'")
        .await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    drain(&context, &mut consumer).await;

    let status: String = sqlx::query_scalar("SELECT status FROM fulfillments")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "backordered");
    assert_eq!(
        app.stock_of("MUG-001").await,
        MUGS,
        "the mugs in stock were not taken either"
    );
    assert_eq!(app.stock_of("LAMP-008").await, 0);
}

#[tokio::test]
async fn the_confirmation_email_escapes_what_it_shows_and_is_sandboxed() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    app.admin_db("UPDATE products SET name = '<script>alert(1)</script>' WHERE sku = 'MUG-001'")
        .await;
    let order_id = app.paid_orders(1).await[0];
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    drain(&context, &mut consumer).await;

    let response = app
        .client
        .get(app.url(&format!("/orders/{order_id}/email")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-security-policy"], "sandbox");
    let html = response.text().await.unwrap();
    assert!(!html.contains("<script>"), "{html}");
    assert!(
        html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"),
        "{html}"
    );
}
