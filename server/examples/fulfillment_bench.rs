//! Prints figures for the event chain on each bus (PostgreSQL, and NATS JetStream when it
//! answers): events/s through one relay, and the latency from an order being paid to its
//! fulfillment (p50/p99). Figures only: nothing is asserted. Run by `scripts/bench fulfillment`.
//!
//! Usage: fulfillment_bench [EVENTS] [ORDERS]   (defaults 5000 and 300)

use std::time::Instant;

use server::{
    config::Config,
    payments::apply::{self, ChargeFacts},
    startup::Application,
    workers::{self, Worker},
};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let events: i64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5000);
    let orders: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(300);
    let nats = std::env::var("BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    bench("postgres", None, events, orders).await?;
    match async_nats::connect(&nats).await {
        Ok(_) => bench("nats", Some(nats), events, orders).await?,
        Err(e) => println!("nats: skipped ({e})"),
    }
    Ok(())
}

async fn bench(bus: &str, nats: Option<String>, events: i64, orders: usize) -> anyhow::Result<()> {
    let tag = Uuid::new_v4().simple().to_string();
    let admin = std::env::var("BENCH_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let mut config = Config::from_vars(|name| match name {
        "PROVIDER_WEBHOOK_SECRETS" => Some("bench-only-webhook-secret".into()),
        "IDEMPOTENCY_FINGERPRINT_SECRETS" => Some("bench-only-fingerprint-secret".into()),
        "LEPTOS_SITE_ADDR" => Some("127.0.0.1:0".into()),
        _ => std::env::var(name).ok(),
    })?;
    config.database_url = format!("{admin}/once_bench_{tag}");
    config.events.run_workers = false;
    if nats.is_some() {
        config.events.nats_url = nats;
        config.events.nats_stream = format!("ONCE_BENCH_{tag}");
        config.events.nats_subject_prefix = format!("once_bench_{tag}.events");
    }
    let app = Application::build(config.clone()).await?;
    let db = app.db().clone();
    let context = app.worker_context();

    // 1. Relay throughput: a backlog of events, drained by one relay.
    sqlx::query(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         SELECT gen_random_uuid(), 'bench', gen_random_uuid(), 'bench.event', '{}'::jsonb
           FROM generate_series(1, $1)",
    )
    .bind(events)
    .execute(&db)
    .await?;
    let relay = context.relay();
    let started = Instant::now();
    while relay.try_execute_task().await? > 0 {}
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{bus}: relay published {events} events in {secs:.2} s: {:.0} events/s",
        events as f64 / secs
    );

    // 2. Paid → fulfilled: relay, consumer and mailer running as the server runs them.
    sqlx::query("UPDATE products SET stock = 1000000")
        .execute(&db)
        .await?;
    let stop = CancellationToken::new();
    workers::spawn(&context, &[Worker::Relay, Worker::Fulfillment], &stop).await?;
    for _ in 0..orders {
        pay_one(&db).await?;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    wait_until_fulfilled(&db, orders as i64).await?;
    stop.cancel();
    let (p50, p99): (f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)
           FROM (SELECT extract(epoch FROM f.created_at - e.created_at) * 1000 AS ms
                   FROM fulfillments f JOIN outbox_events e
                     ON e.aggregate_id = f.order_id AND e.event_type = 'order.paid') l",
    )
    .fetch_one(&db)
    .await?;
    println!("{bus}: {orders} orders paid → fulfilled: p50 {p50:.1} ms, p99 {p99:.1} ms");

    if let Some(url) = &config.events.nats_url {
        let nats = once_events::bus::nats::NatsBus::connect(url, &config.events.bus()).await?;
        nats.delete_stream().await?;
    }
    db.close().await;
    let admin_db = PgPool::connect(&format!("{admin}/postgres")).await?;
    sqlx::query(&format!(
        "DROP DATABASE IF EXISTS once_bench_{tag} WITH (FORCE)"
    ))
    .execute(&admin_db)
    .await?;
    Ok(())
}

/// One order for a mug, paid through the real apply path (which writes `order.paid`).
async fn pay_one(db: &PgPool) -> anyhow::Result<()> {
    let (order_id, payment_id) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tx = db.begin().await?;
    sqlx::query("INSERT INTO orders (id, session_id, currency, total_cents) VALUES ($1, 'bench', 'EUR', 1800)")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
         VALUES ($1, 1, 'MUG-001', 'Stoneware mug', 1, 1800)",
    )
    .bind(order_id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         VALUES ($1, $2, 'bench', $1::text, 1800, 'EUR')",
    )
    .bind(payment_id)
    .bind(order_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut tx = db.begin().await?;
    let charge = ChargeFacts {
        charge_id: format!("ch_{payment_id}"),
        amount_cents: 1800,
        currency: "EUR".into(),
    };
    apply::charge_succeeded(&mut tx, payment_id, &charge).await?;
    tx.commit().await?;
    Ok(())
}

async fn wait_until_fulfilled(db: &PgPool, n: i64) -> anyhow::Result<()> {
    loop {
        let done: i64 = sqlx::query_scalar("SELECT count(*) FROM fulfillments")
            .fetch_one(db)
            .await?;
        if done >= n {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
