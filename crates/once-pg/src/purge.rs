//! Retention: keys that finished (completed or failed) longer ago than the window are
//! deleted, after which reusing a key is a new request. Retention counts from the end of
//! the request, not its start, and a key whose request is still running is never touched:
//! deleting it would let a repeat execute beside the running request. A key left
//! `processing` by a holder that died is deleted once its lease has been over for a whole
//! retention window.

use std::time::Duration;

use sqlx::PgPool;

/// Deletes the keys past retention; returns how many. Safe on several instances at once:
/// each DELETE is independent and idempotent.
pub async fn purge(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query(
        "DELETE FROM idempotency_keys
          WHERE (state IN ('completed', 'failed') AND finished_at < now() - $1::bigint * interval '1 millisecond')
             OR (state = 'processing' AND locked_until < now() - $1::bigint * interval '1 millisecond')",
    )
    .bind(retention.as_millis() as i64)
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}
