//! What an application may ask of the key table without writing SQL against it: whether a
//! key's request is running, whether a scope holds keys (as an expression for its own
//! statement), how many keys are in each state.

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

/// A boolean SQL expression: whether the scope `scope` (an SQL expression of the
/// application's statement, such as `s.id`) holds at least one key. For an application
/// that forgets its scopes (idle sessions) in one statement, so that a key claimed meanwhile
/// is seen by the same statement that deletes. `scope` is a constant of the application's,
/// never text built from a request.
///
/// ```
/// let keyed = once_pg::inspect::scope_holds_keys("s.id");
/// let sql = format!("DELETE FROM sessions s WHERE s.idle AND NOT {keyed}");
/// assert!(sql.contains("idempotency_keys"));
/// ```
pub fn scope_holds_keys(scope: &'static str) -> String {
    format!("EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.scope = ({scope}))")
}

/// How many keys the table holds in each state (`processing`, `completed`, `failed`),
/// states with none left out, in the states' order.
pub async fn key_counts(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT state, count(*) FROM idempotency_keys GROUP BY state ORDER BY state")
        .fetch_all(db)
        .await
}
