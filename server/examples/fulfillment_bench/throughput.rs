//! Relay throughput: one relay drains a backlog, and pgbench drains the same backlog with
//! the relay's own batched statements, written as SQL, on one connection. The ratio is the
//! figure: how close the relay comes to what the database itself allows for that work.

use std::{process::Command, time::Instant};

use once_events::relay::BATCH;
use server::workers::Context;
use sqlx::PgPool;

/// The batch claimed, as the relay claims it (`once_events::relay`).
const CLAIM: &str = "SELECT id, event_type, aggregate_type, aggregate_id, payload, created_at
  FROM outbox_events WHERE published_at IS NULL ORDER BY created_at LIMIT :batch";

pub struct Throughput {
    pub relay_per_sec: f64,
    pub pgbench_per_sec: f64,
}

pub async fn measure(context: &Context, bus: &str, events: i64) -> anyhow::Result<Throughput> {
    let db = &context.db;
    // One consumer per message, as `order.paid` has: the PostgreSQL bus writes its delivery.
    sqlx::query("INSERT INTO bus_consumers (name, subject) VALUES ('bench', 'bench.event')")
        .execute(db)
        .await?;
    backlog(db, events).await?;
    let pgbench_per_sec = pgbench(&context.config.database_url, bus == "postgres", events)?;

    clear(db).await?;
    backlog(db, events).await?;
    let relay = context.relay();
    let started = Instant::now();
    while relay.try_execute_task().await? > 0 {}
    let relay_per_sec = events as f64 / started.elapsed().as_secs_f64();
    clear(db).await?;
    Ok(Throughput {
        relay_per_sec,
        pgbench_per_sec,
    })
}

/// `events` unpublished events, each as large as an `order.paid`, on fresh statistics.
async fn backlog(db: &PgPool, events: i64) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         SELECT gen_random_uuid(), 'order', gen_random_uuid(), 'bench.event',
                jsonb_build_object('order_id', gen_random_uuid())
           FROM generate_series(1, $1)",
    )
    .bind(events)
    .execute(db)
    .await?;
    sqlx::query("VACUUM ANALYZE outbox_events")
        .execute(db)
        .await?;
    Ok(())
}

/// Empties the outbox and the bus tables, so the next run starts on fresh tables.
async fn clear(db: &PgPool) -> anyhow::Result<()> {
    sqlx::query("TRUNCATE bus_deliveries, bus_messages, outbox_events")
        .execute(db)
        .await?;
    Ok(())
}

/// pgbench on one connection, one transaction per batch: claim, (on the PostgreSQL bus)
/// store the messages and their deliveries in one statement, mark. Events per second.
fn pgbench(url: &str, postgres_bus: bool, events: i64) -> anyhow::Result<f64> {
    let publish = format!(
        "WITH claimed AS ({}),
         stored AS (
           INSERT INTO bus_messages (id, subject, body)
           SELECT id, event_type, convert_to(row_to_json(claimed)::text, 'UTF8') FROM claimed
           ON CONFLICT ON CONSTRAINT bus_messages_pkey DO NOTHING RETURNING id, subject),
         delivered AS (
           INSERT INTO bus_deliveries (consumer, message_id)
           SELECT c.name, s.id FROM stored s JOIN bus_consumers c ON c.subject = s.subject)
         SELECT count(*) FROM stored;",
        CLAIM
    );
    let script = format!(
        "BEGIN;\n{CLAIM} FOR UPDATE SKIP LOCKED;\n{}\
         UPDATE outbox_events SET published_at = now() WHERE id IN (SELECT id FROM ({CLAIM}) c);\nCOMMIT;\n",
        if postgres_bus {
            publish + "\n"
        } else {
            String::new()
        }
    );
    let dir = std::env::temp_dir().join(format!("relay-pgbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("relay.sql");
    std::fs::write(&file, script)?;
    let batches = (events + BATCH - 1) / BATCH;
    let out = Command::new("pgbench")
        .args(["-n", "-c", "1", "-t", &batches.to_string(), "-D"])
        .arg(format!("batch={BATCH}"))
        .arg("-f")
        .arg(&file)
        .arg(url)
        .output()?;
    std::fs::remove_dir_all(&dir)?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .ok_or_else(|| anyhow::anyhow!("no tps in pgbench's output: {text}"))?
        .parse()?;
    Ok(events as f64 * tps / batches as f64)
}

/// The fulfillment consumer draining a backlog of `orders` paid orders: events/s.
pub async fn consumer(context: &Context, orders: usize) -> anyhow::Result<f64> {
    for _ in 0..orders {
        crate::orders::pay_one(&context.db).await?;
    }
    let relay = context.relay();
    while relay.try_execute_task().await? > 0 {}
    let mut consumer = context.fulfillment().await?;
    let started = Instant::now();
    let mut consumed = 0;
    while consumed < orders {
        consumed += consumer
            .try_execute_task(std::time::Duration::from_secs(1))
            .await?;
    }
    let per_sec = orders as f64 / started.elapsed().as_secs_f64();
    // The `order.fulfilled` events it wrote, published before the next measurement starts.
    while relay.try_execute_task().await? > 0 {}
    Ok(per_sec)
}
