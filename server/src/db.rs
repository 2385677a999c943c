//! The shop database: created if missing, migrated at start, shared through one pool.

use std::{str::FromStr, time::Duration};

use crate::config::DbLimits;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, Connection, PgPool,
};

/// Creates the database named in `url` when it does not exist yet. Safe to race: a
/// concurrent creator makes us see `duplicate_database`, which is success too.
pub async fn ensure_database(url: &str) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url)?;
    let name = options.get_database().unwrap_or("postgres").to_owned();
    let mut admin = options.database("postgres").connect().await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut admin)
            .await?;
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        match sqlx::query(&format!("CREATE DATABASE {quoted}"))
            .execute(&mut admin)
            .await
        {
            Ok(_) => tracing::info!(database = %name, "created database"),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
            Err(e) => return Err(e.into()),
        }
    }
    admin.close().await?;
    Ok(())
}

/// A pool that fails fast when the database is down (so clients get a quick 503) and
/// recovers by itself: every connection is tested before it is handed out. Every session
/// carries the configured bounds on statements, lock waits and idle transactions.
pub async fn connect(url: &str, limits: &DbLimits) -> anyhow::Result<PgPool> {
    let ms = |d: Duration| d.as_millis().to_string();
    let options = PgConnectOptions::from_str(url)?.options([
        ("statement_timeout", ms(limits.statement_timeout)),
        ("lock_timeout", ms(limits.lock_timeout)),
        (
            "idle_in_transaction_session_timeout",
            ms(limits.idle_in_transaction_timeout),
        ),
    ]);
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .acquire_timeout(Duration::from_secs(3))
        .test_before_acquire(true)
        .connect_with(options)
        .await?;
    Ok(pool)
}

/// Runs the shop's migrations. Transactional DDL makes a crash mid-migration harmless and
/// re-running them on every start a no-op.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("../migrations").run(pool).await?;
    Ok(())
}
