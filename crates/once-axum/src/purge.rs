//! The retention task: [`once_pg::purge()`] on a timer. One step for tests (call
//! `once_pg::purge`), a loop for the server.

use std::time::Duration;

use sqlx::PgPool;

/// Purges keys past `retention` every `every`, until the task is dropped. Safe on several
/// instances at once: each DELETE is independent and idempotent.
pub async fn run(db: PgPool, retention: Duration, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match once_pg::purge(&db, retention).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "purged expired idempotency keys"),
            Err(e) => tracing::warn!(error = %e, "idempotency purge failed; will retry"),
        }
    }
}
