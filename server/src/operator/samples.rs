//! The samples behind the console's charts: every minute, one row of what an operator watches
//! over time (outbox lag, deliveries waiting on either bus, dead letters, and the requests
//! of the minute by how they were answered, counted from the order journal). Every
//! instance samples; the minute is the row's key, so the first to write it wins and the
//! others add nothing. Kept for two days (the retention worker).

use std::time::Duration;

use once_events::bus::Bus;
use sqlx::PgPool;

use crate::fulfillment;

/// How often a sample is taken.
pub const EVERY: Duration = Duration::from_secs(60);

/// One minute's figures.
pub struct Sample {
    pub at: chrono::DateTime<chrono::Utc>,
    pub outbox_lag_ms: i64,
    pub deliveries_waiting_pg: i32,
    pub deliveries_waiting_js: Option<i32>,
    pub dead_letters: i32,
    pub new_keys: i32,
    pub replays: i32,
    pub in_progress: i32,
    pub key_reused: i32,
}

/// Takes the sample of the last minute that ended 15 seconds ago or more, unless an instance took it already; true
/// if this call did.
/// JetStream's count is read from the bus (`None` on the PostgreSQL bus, or when the bus
/// does not answer: the rest of the sample is still worth keeping).
pub async fn try_execute_task(db: &PgPool, bus: &dyn Bus) -> Result<bool, sqlx::Error> {
    let waiting = match bus.waiting(fulfillment::CONSUMER).await {
        Ok(waiting) => waiting.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        Err(e) => {
            tracing::warn!(error = %e, "the bus did not say how many deliveries wait");
            None
        }
    };
    // The sample of the minute that ended at least 15 seconds ago, whole: by then the repeat
    // writers have written its repeats (folded a minute to a row, migration 0012, so the
    // minute's rows sum them) and its requests have committed. The gauges are as they stand
    // now. Skipped at once if another instance took it.
    let outbox = once_events::outbox::backlog(db).await?;
    let inserted = sqlx::query!(
        r#"WITH m AS (SELECT date_trunc('minute', now() - interval '15 seconds') - interval '1 minute' AS minute)
           INSERT INTO console_samples (at, outbox_unpublished, outbox_lag_ms, deliveries_waiting_pg,
                                        deliveries_waiting_js, dead_letters, new_keys, replays,
                                        in_progress, key_reused)
           SELECT m.minute,
                  $2::bigint, $3::bigint,
                  (SELECT count(*) FROM bus_deliveries WHERE settled_at IS NULL),
                  $1,
                  (SELECT count(*) FROM dead_letters WHERE status = 'dead'),
                  (SELECT count(*) FROM order_journal
                    WHERE kind = 'request' AND at >= m.minute AND at < m.minute + interval '1 minute'),
                  r.replays, r.in_progress, r.key_reused
             FROM m,
                  LATERAL (SELECT coalesce(sum(repeats) FILTER (WHERE kind = 'replay'), 0) AS replays,
                                  coalesce(sum(repeats) FILTER (WHERE kind = 'in_progress'), 0) AS in_progress,
                                  coalesce(sum(repeats) FILTER (WHERE kind = 'key_reused'), 0) AS key_reused
                             FROM order_journal WHERE fold_minute = m.minute) r
            WHERE NOT EXISTS (SELECT 1 FROM console_samples s WHERE s.at = m.minute)
           ON CONFLICT ON CONSTRAINT console_samples_pkey DO NOTHING"#,
        waiting,
        outbox.unpublished,
        (outbox.oldest_secs * 1000.0).round() as i64,
    )
    .execute(db)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Samples every minute until the task is dropped.
pub async fn run_worker(db: PgPool, bus: std::sync::Arc<dyn Bus>) {
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        if let Err(e) = try_execute_task(&db, bus.as_ref()).await {
            tracing::warn!(error = %e, "the console's sample was not taken; next minute");
        }
    }
}

/// The samples of the last `hours`, oldest first.
pub async fn since(db: &PgPool, hours: i32) -> Result<Vec<Sample>, sqlx::Error> {
    sqlx::query_as!(
        Sample,
        r#"SELECT at AS "at: chrono::DateTime<chrono::Utc>", outbox_lag_ms, deliveries_waiting_pg,
                  deliveries_waiting_js, dead_letters, new_keys, replays, in_progress, key_reused
             FROM console_samples WHERE at > now() - make_interval(hours => $1)
            ORDER BY at"#,
        hours,
    )
    .fetch_all(db)
    .await
}

/// Forgets samples older than two days.
pub async fn forget_old(db: &PgPool) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!("DELETE FROM console_samples WHERE at < now() - interval '2 days'")
        .execute(db)
        .await?;
    Ok(deleted.rows_affected())
}
