//! The shop database: created if missing, migrated at start, shared through one pool (and
//! a few connections kept aside for the first read of every idempotent request, `readers`).

mod readers;
mod server_watch;

pub use readers::{Reader, Readers};
pub use server_watch::ServerWatch;

use std::{
    str::FromStr,
    sync::{
        atomic::{AtomicU64, Ordering},
        OnceLock,
    },
    time::{Duration, Instant},
};

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
    let exists = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "exists!""#,
        &name,
    )
    .fetch_one(&mut admin)
    .await?;
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        // Run-time SQL: the database's name comes from DATABASE_URL, and an identifier
        // cannot be a bind parameter.
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

/// A connection idle for longer than this is pinged before it is handed out.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(1);
/// For this long after a lost connection, every connection is pinged before it is handed
/// out: its siblings in the pool were most likely lost with it.
const PING_AFTER_LOSS: Duration = Duration::from_secs(10);

/// When this process last saw a connection die, in milliseconds since `EPOCH` (0: never).
static LAST_LOSS_MS: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Records that a connection was found dead (the database restarted, or killed it). Only
/// a hint for the pool's pings: correctness never depends on it.
pub fn note_lost_connection(e: &sqlx::Error) {
    let lost = match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    };
    if lost {
        note_possible_loss();
    }
}

/// The same, for a failure whose cause arrives as text only (the session store's).
pub fn note_possible_loss() {
    LAST_LOSS_MS.store(now_ms(), Ordering::Relaxed);
}

pub(crate) fn lost_one_recently() -> bool {
    let last = LAST_LOSS_MS.load(Ordering::Relaxed);
    last != 0 && now_ms() - last < PING_AFTER_LOSS.as_millis() as u64
}

/// A pool that fails fast when the database is down (so clients get a quick 503) and
/// recovers by itself. A connection that sat idle for a second is pinged before it is
/// handed out, and so is every connection for ten seconds after one was found dead: after
/// an outage, a dead connection is replaced rather than used. A connection used within the
/// last second is handed out without a ping, because a ping on every acquire is a round trip
/// per statement for nothing while the database is well (sqlx already pings each connection
/// as it is returned); so the first request that meets one killed since (a database restart
/// under load) answers 503, retryable, and from then on every connection is checked. Every
/// session carries the configured bounds on statements, lock waits and idle transactions,
/// and reads committed data statement by statement.
/// Each new connection tells `watch` which server it reached.
pub async fn connect(url: &str, limits: &DbLimits, watch: ServerWatch) -> anyhow::Result<PgPool> {
    let ms = |d: Duration| d.as_millis().to_string();
    let options = PgConnectOptions::from_str(url)?.options([
        ("statement_timeout", ms(limits.statement_timeout)),
        ("lock_timeout", ms(limits.lock_timeout)),
        (
            "idle_in_transaction_session_timeout",
            ms(limits.idle_in_transaction_timeout),
        ),
        // Written down, not assumed: an order's transaction begins before its claim
        // commits, and its completion must see the claim's row (docs/decisions/0006).
        (
            "default_transaction_isolation",
            r"read\ committed".to_owned(), // a space in `options` is escaped
        ),
    ]);
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .acquire_timeout(Duration::from_secs(3))
        .test_before_acquire(false)
        .after_connect(move |conn, _| {
            let watch = watch.clone();
            Box::pin(async move { watch.note(conn).await })
        })
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE || lost_one_recently() {
                    // A dead one is dropped and another handed out; its siblings, maybe
                    // dead too, are checked from now on.
                    if let Err(e) = conn.ping().await {
                        note_possible_loss();
                        return Err(e);
                    }
                }
                Ok(true)
            })
        })
        .connect_with(options)
        .await?;
    Ok(pool)
}

/// Turns the violation of a named constraint into the caller's own error (a domain refusal,
/// which the route then answers as a clear 4xx); any other database error passes through.
/// The database decides the race, and the constraint's name says which one it decided.
pub trait OnConstraint<T> {
    fn on_constraint<E: From<sqlx::Error>>(
        self,
        name: &str,
        map: impl FnOnce() -> E,
    ) -> Result<T, E>;
}

impl<T> OnConstraint<T> for Result<T, sqlx::Error> {
    fn on_constraint<E: From<sqlx::Error>>(
        self,
        name: &str,
        map: impl FnOnce() -> E,
    ) -> Result<T, E> {
        self.map_err(|e| match &e {
            sqlx::Error::Database(db) if db.constraint() == Some(name) => map(),
            _ => e.into(),
        })
    }
}

/// Runs the shop's migrations. Transactional DDL makes a crash mid-migration harmless and
/// re-running them on every start a no-op.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("../migrations").run(pool).await?;
    Ok(())
}
