//! Telling an outage from a failure: the one rule for which database errors are worth
//! waiting out. The consumer runtime retries them without end; an app may use the same rule
//! for its own answers (an HTTP service may answer them 503 with `Retry-After`).

/// Errors that say "the database is unreachable or busy right now", not "this work is
/// wrong": lost connections, an exhausted pool, shutdown, serialization failures, a
/// database that refuses new connections (55000, as during maintenance), a write that
/// reached a node that is not the primary (25006: during a failover a connection can still
/// lead to a standby, or to a new primary that does not take writes yet), and the bounds a
/// session may set running out: a lock wait (55P03), a statement (57014) or an idle
/// transaction (25P03) that took too long.
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_) => true,
        sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08")
                || code.starts_with("57P")
                || [
                    "40001", "40P01", "53300", "55000", "55P03", "57014", "25P03", "25006",
                ]
                .contains(&code.as_ref())
        }),
        _ => false,
    }
}

/// A deadlock (40P01) or a serialization failure (40001): transactions that got in each
/// other's way. Unlike an outage, running the work again at once, in smaller pieces, helps.
pub fn is_conflict(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.code().is_some_and(|code| code == "40P01" || code == "40001"))
}
