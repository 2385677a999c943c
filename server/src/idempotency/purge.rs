//! Retention: keys that finished (completed or failed) longer ago than the window are
//! deleted, after which reusing a key is a new request. Retention counts from the end of
//! the request, not its start, and a key whose request is still running is never touched:
//! deleting it would let a repeat execute beside the running request. A key left
//! `processing` by a holder that died is deleted once its lease has been over for a whole
//! retention window. One step ([`try_execute_task`]) for tests, a loop for the server.

use std::time::Duration;

use sqlx::PgPool;

/// Deletes the keys past retention; returns how many.
pub async fn try_execute_task(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!(
        "DELETE FROM idempotency_keys
          WHERE (state IN ('completed', 'failed') AND finished_at < now() - $1::bigint * interval '1 millisecond')
             OR (state = 'processing' AND locked_until < now() - $1::bigint * interval '1 millisecond')",
        (retention.as_millis() as i64)
    )
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}

/// Runs the purge every `every` until the task is dropped. Safe on several instances at
/// once: each DELETE is independent and idempotent.
pub async fn run_worker(db: PgPool, retention: Duration, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match try_execute_task(&db, retention).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "purged expired idempotency keys"),
            Err(e) => tracing::warn!(error = %e, "idempotency purge failed; will retry"),
        }
        // The keys of "Add to cart" forms live as long as Idempotency-Keys do.
        if let Err(e) = crate::cart::forget_old_adds(&db, retention).await {
            tracing::warn!(error = %e, "forgetting old cart adds failed; will retry");
        }
        // And the console's login throttle forgets addresses quiet for a day.
        if let Err(e) = crate::operator::throttle::forget_quiet(&db).await {
            tracing::warn!(error = %e, "forgetting quiet login throttle rows failed; will retry");
        }
    }
}
