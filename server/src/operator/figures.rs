//! The figures of the console's overview, each read from the database (so the same on every
//! instance): what an operator of a payments system watches first.

use sqlx::PgPool;

/// The overview's figures as (label, value), in the order they are shown.
pub async fn read(db: &PgPool) -> Result<Vec<(String, String)>, sqlx::Error> {
    let mut figures = single(db).await?;
    figures.extend(by_state(db).await?);
    Ok(figures)
}

/// The figures of one value each, in the order they are shown: the outbox's from its crate,
/// the rest in one statement, one snapshot.
async fn single(db: &PgPool) -> Result<Vec<(String, String)>, sqlx::Error> {
    let outbox = once_events::outbox::backlog(db).await?;
    let f = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM bus_deliveries WHERE settled_at IS NULL)::text AS "deliveries_waiting!",
                  (SELECT count(*) FROM dead_letters WHERE status = 'dead')::text AS "dead_letters!",
                  (SELECT count(*) FROM emails WHERE status = 'queued')::text AS "emails_queued!",
                  (SELECT count(*) FROM reconcile_findings WHERE status = 'open')::text AS "open_findings!",
                  coalesce((SELECT status || ' at ' || to_char(started_at, 'YYYY-MM-DD HH24:MI:SS') || ', '
                                   || findings || ' new findings'
                              FROM reconcile_runs ORDER BY started_at DESC LIMIT 1), 'never') AS "last_run!",
                  (SELECT count(*) FROM payment_callbacks
                    WHERE outcome IN ('amount_mismatch', 'unknown_payment'))::text AS "callback_anomalies!""#
    )
    .fetch_one(db)
    .await?;
    Ok([
        ("Outbox: unpublished events", outbox.unpublished.to_string()),
        (
            "Outbox: oldest unpublished (s)",
            format!("{:.0}", outbox.oldest_secs),
        ),
        (
            "Consumers: deliveries waiting (PostgreSQL bus)",
            f.deliveries_waiting,
        ),
        ("Dead letters waiting", f.dead_letters),
        ("Emails queued", f.emails_queued),
        ("Open findings", f.open_findings),
        ("Last reconciliation", f.last_run),
        (
            "Callback anomalies (amount mismatch, unknown payment)",
            f.callback_anomalies,
        ),
    ]
    .into_iter()
    .map(|(label, value)| (label.to_owned(), value))
    .collect())
}

/// Idempotency keys and payments counted by state: one line per state present.
async fn by_state(db: &PgPool) -> Result<Vec<(String, String)>, sqlx::Error> {
    let keys = once_pg::inspect::key_counts(db).await?;
    let payments = sqlx::query!(
        r#"SELECT status AS "status!", count(*) AS "count!" FROM payments GROUP BY status ORDER BY 1"#
    )
    .fetch_all(db)
    .await?;
    let keys = keys
        .into_iter()
        .map(|(state, count)| (format!("Idempotency keys: {state}"), count.to_string()));
    let payments = payments
        .into_iter()
        .map(|p| (format!("Payments: {}", p.status), p.count.to_string()));
    Ok(keys.chain(payments).collect())
}
