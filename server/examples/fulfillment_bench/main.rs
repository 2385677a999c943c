//! Prints figures for the event chain on each bus (PostgreSQL, and NATS JetStream when it
//! answers). Figures only: nothing is asserted. Run by `scripts/bench fulfillment`.
//!
//! 1. Relay throughput: events/s one relay publishes from a backlog, next to pgbench running
//!    the relay's own batched statements on the same database; then the paid orders/s the
//!    fulfillment consumer drains from a backlog (`throughput`).
//! 2. Paid → fulfilled latency (p50, p99, max) while orders are paid at a steady rate, and
//!    the outbox lag meanwhile (`latency`).
//! 3. The highest rate at which the shop's payment path writes paid orders here, with the
//!    outbox lag and the orders waiting for fulfillment sampled every second (`latency`).
//!
//! Usage: fulfillment_bench [EVENTS] [SECONDS] [RATE] [MAX_SECONDS]
//!        (defaults 50000 events, 60 s at 200 orders/s, 20 s at the highest rate)

mod latency;
mod orders;
mod throughput;

use server::{config::Config, startup::Application, workers};
use sqlx::PgPool;
use uuid::Uuid;

/// Paid orders in the backlog the fulfillment consumer drains.
const CONSUMER_BACKLOG: usize = 3000;

struct Args {
    events: i64,
    seconds: u64,
    rate: u32,
    max_seconds: u64,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = std::env::args().skip(1);
        let mut next = |default: u64| -> anyhow::Result<u64> {
            Ok(args
                .next()
                .map(|a| a.parse())
                .transpose()?
                .unwrap_or(default))
        };
        Ok(Self {
            events: next(50_000)? as i64,
            seconds: next(60)?,
            rate: next(200)? as u32,
            max_seconds: next(20)?,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let nats = std::env::var("BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    bench("postgres", None, &args).await?;
    match async_nats::connect(&nats).await {
        Ok(_) => bench("jetstream", Some(nats), &args).await?,
        Err(e) => println!("jetstream: skipped ({e})"),
    }
    Ok(())
}

/// A fresh shop database (and on JetStream a stream of its own) for one bus's run.
struct Run {
    bus: &'static str,
    admin: String,
    database: String,
    config: Config,
}

impl Run {
    fn new(bus: &'static str, nats: Option<String>) -> anyhow::Result<Self> {
        let tag = Uuid::new_v4().simple().to_string();
        let admin = std::env::var("BENCH_DATABASE_ADMIN_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
        let mut config = Config::from_vars(|name| match name {
            "PROVIDER_WEBHOOK_SECRETS" => Some("bench-only-webhook-secret".into()),
            "PROVIDER_API_KEY" => Some("bench-only-provider-api-key".into()),
            "IDEMPOTENCY_FINGERPRINT_SECRETS" => Some("bench-only-fingerprint-secret".into()),
            "LEPTOS_SITE_ADDR" => Some("127.0.0.1:0".into()),
            _ => std::env::var(name).ok(),
        })?;
        let database = format!("once_bench_{tag}");
        config.database_url = format!("{admin}/{database}");
        config.events.run_workers = false;
        if nats.is_some() {
            config.events.nats_url = nats;
            config.events.nats_stream = format!("ONCE_BENCH_{tag}");
            config.events.nats_subject_prefix = format!("once_bench_{tag}.events");
        }
        Ok(Self {
            bus,
            admin,
            database,
            config,
        })
    }

    async fn finish(self, db: PgPool) -> anyhow::Result<()> {
        if let Some(url) = &self.config.events.nats_url {
            let bus = self.config.events.bus();
            once_events::bus::nats::NatsBus::connect(url, &bus)
                .await?
                .delete_stream()
                .await?;
        }
        db.close().await;
        let admin = PgPool::connect(&format!("{}/postgres", self.admin)).await?;
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database);
        sqlx::query(&drop).execute(&admin).await?;
        Ok(())
    }
}

async fn bench(bus: &'static str, nats: Option<String>, args: &Args) -> anyhow::Result<()> {
    let run = Run::new(bus, nats)?;
    let app = Application::build(run.config.clone()).await?;
    let db = app.db().clone();
    let context: workers::Context = app.worker_context();

    let relay = throughput::measure(&context, run.bus, args.events).await?;
    println!(
        "{bus}: relay {:.0} events/s; pgbench running the relay's statements {:.0} events/s; ratio {:.2}",
        relay.relay_per_sec,
        relay.pgbench_per_sec,
        relay.relay_per_sec / relay.pgbench_per_sec
    );

    sqlx::query("UPDATE products SET stock = 100000000")
        .execute(&db)
        .await?;
    let consumer = throughput::consumer(&context, CONSUMER_BACKLOG).await?;
    println!("{bus}: the fulfillment consumer drains {consumer:.0} paid orders/s");
    let steady = latency::steady(&context, args.rate, args.seconds).await?;
    println!(
        "{bus}: {} orders paid at {}/s for {} s → fulfilled: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; outbox lag {}",
        steady.orders, args.rate, args.seconds, steady.p50_ms, steady.p99_ms, steady.max_ms, steady.lag
    );
    let flat_out = latency::flat_out(&context, args.max_seconds).await?;
    println!(
        "{bus}: highest rate {:.0} orders/s for {} s ({} payers) → fulfilled: p50 {:.1} ms, p99 {:.1} ms; outbox lag {}; orders waiting {}",
        flat_out.rate, args.max_seconds, latency::PAYERS, flat_out.p50_ms, flat_out.p99_ms, flat_out.lag, flat_out.waiting
    );
    run.finish(db).await
}
