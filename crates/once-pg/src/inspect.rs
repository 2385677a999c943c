//! What an application may ask of the key table without writing SQL against it: whether a
//! key's request is running, which of its scopes hold keys, how many keys are in each state.

use std::time::Duration;

use sqlx::PgExecutor;

/// Whether the request of `key` in `scope` is running: claimed, and its lease valid or
/// lapsed less than `slack` ago (a holder between two renewals is still alive).
pub async fn is_running(
    db: impl PgExecutor<'_>,
    scope: &str,
    key: &str,
    slack: Duration,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM idempotency_keys
                         WHERE scope = $1 AND key = $2 AND state = 'processing'
                           AND locked_until > now() - $3::bigint * interval '1 millisecond')",
    )
    .bind(scope)
    .bind(key)
    .bind(slack.as_millis() as i64)
    .fetch_one(db)
    .await
}

/// Those of `scopes` that hold at least one key (of any state): an application forgetting
/// its scopes (idle sessions) keeps these.
pub async fn scopes_holding_keys(
    db: impl PgExecutor<'_>,
    scopes: &[String],
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT s.scope FROM unnest($1::text[]) AS s (scope)
          WHERE EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.scope = s.scope)",
    )
    .bind(scopes)
    .fetch_all(db)
    .await
}

/// How many keys the table holds in each state (`processing`, `completed`, `failed`),
/// states with none left out, in the states' order.
pub async fn key_counts(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT state, count(*) FROM idempotency_keys GROUP BY state ORDER BY state")
        .fetch_all(db)
        .await
}
