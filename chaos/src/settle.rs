//! After the faults stop: wait until the system has finished what it owes — events
//! published and consumed, paid orders fulfilled, emails delivered, webhooks delivered,
//! no payment left pending — before the checker counts. What is still owed at the deadline
//! is printed, and the checker then counts it as lost.

use std::time::Duration;

use sqlx::PgPool;
use tokio::time::Instant;

const OWED_SHOP: &str = "
    SELECT (SELECT count(*) FROM outbox_events WHERE published_at IS NULL)
         + (SELECT count(*) FROM emails WHERE status = 'queued')
         + (SELECT count(*) FROM payments WHERE status IN ('pending', 'refund_due'))
         + (SELECT count(*) FROM orders o WHERE EXISTS
               (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'succeeded')
             AND NOT EXISTS (SELECT 1 FROM fulfillments f WHERE f.order_id = o.id))";

const OWED_PROVIDER: &str = "SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NULL";

pub async fn settle(shop: &PgPool, provider: &PgPool, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    let started = Instant::now();
    loop {
        let owed = owed(shop, provider).await;
        match owed {
            Ok((0, 0)) => {
                println!(
                    "chaos: settled after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            Ok((ours, theirs)) if Instant::now() >= deadline => {
                println!(
                    "chaos: still owed after {within:?}: {ours} in the shop, {theirs} webhooks"
                );
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => return Err(e),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn owed(shop: &PgPool, provider: &PgPool) -> anyhow::Result<(i64, i64)> {
    let ours: i64 = sqlx::query_scalar(OWED_SHOP).fetch_one(shop).await?;
    let theirs: i64 = sqlx::query_scalar(OWED_PROVIDER)
        .fetch_one(provider)
        .await?;
    Ok((ours, theirs))
}
