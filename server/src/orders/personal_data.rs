//! Forgetting the person behind a finished order: its recipient row goes, and its emails
//! (which name the recipient and the address) go with it, while the order keeps its books —
//! lines, amounts, statuses, payments and journal (docs/operations.md, "Personal data").

use std::time::Duration;

use sqlx::PgPool;

/// Orders forgotten per statement, so that one round never holds many rows at once.
const BATCH: i64 = 500;

/// Forgets the shopper of every order finished (fulfilled or cancelled) longer than
/// `retention` ago, in batches; returns how many orders were forgotten. Safe on several
/// instances at once: an order is taken by one (`SKIP LOCKED`) and marked in the same
/// statement.
pub async fn forget_finished(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let mut forgotten = 0;
    loop {
        let batch = forget_batch(db, retention).await?;
        forgotten += batch;
        if batch < BATCH as u64 {
            return Ok(forgotten);
        }
    }
}

async fn forget_batch(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "WITH due AS (
             SELECT id FROM orders
              WHERE personal_data_forgotten_at IS NULL
                AND status IN ('fulfilled', 'cancelled')
                AND updated_at < now() - $1::bigint * interval '1 millisecond'
                -- an email still being sent is left to finish (and forgotten on a later round);
                -- one queued for longer than the retention never will be, and goes too
                AND NOT EXISTS (SELECT 1 FROM emails q
                                 WHERE q.order_id = orders.id AND q.status = 'queued'
                                   AND q.created_at >= now() - $1::bigint * interval '1 millisecond')
              ORDER BY updated_at
              LIMIT $2
                FOR UPDATE SKIP LOCKED),
           recipients AS (DELETE FROM order_recipients r USING due WHERE r.order_id = due.id),
           emails AS (DELETE FROM emails e USING due WHERE e.order_id = due.id)
         UPDATE orders o SET personal_data_forgotten_at = now() FROM due WHERE o.id = due.id",
        retention.as_millis() as i64,
        BATCH,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
