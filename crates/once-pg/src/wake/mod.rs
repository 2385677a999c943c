//! The repeats that wait for their key's running request (`Prefer: wait`, docs/protocol.md,
//! "Waiting for the original"), woken by the database instead of polling it.
//!
//! * A waiter registers its key with the instance's [`Wakeups`]; the first waiter of a key
//!   on an instance marks the key's row (`awaited`), in one statement.
//! * [`crate::store::complete`] and [`crate::store::fail`] notify [`CHANNEL`] in their own
//!   transaction, only for a marked row: the notification arrives after the commit.
//! * Each instance holds one `LISTEN` connection. A notification for a key someone waits
//!   for here is answered by one read of its row, shared by all its waiters, who judge it
//!   against their own request. A waiter holds no connection and runs no query of its own.
//! * Notifications sent while the listener is down are lost, so every key waited for is
//!   read again when the listener reconnects and at least every [`WaitLimits::fallback`]:
//!   that also finds a lease that lapsed (a takeover, which notifies nobody). A lost
//!   notification costs a late answer, never a wrong one.

mod listener;
mod registry;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::watch;

use crate::store::KeyRow;
use registry::Registry;
pub use registry::Waiter;

/// The notification channel of completed and failed keys that a repeat waits for; each
/// payload is the key's name alone. The scope stays out: where it is a session's token,
/// any role that may `LISTEN` would read it. A listener reads the key in every scope it
/// waits for under that name (usually one).
pub const CHANNEL: &str = "once_keys";

/// How many repeats may wait at once, and how often their keys are read without a
/// notification.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WaitLimits {
    /// Waiters on one instance, all scopes together.
    pub per_instance: usize,
    /// Waiters of one scope on one instance.
    pub per_scope: usize,
    /// The longest a waiter goes without a read of its key: what a lost notification or a
    /// lapsed lease can cost it.
    pub fallback: Duration,
}

impl Default for WaitLimits {
    /// 10,000 waiters per instance, 20 per scope, a read at least every 2 seconds.
    fn default() -> Self {
        Self {
            per_instance: 10_000,
            per_scope: 20,
            fallback: Duration::from_secs(2),
        }
    }
}

impl WaitLimits {
    /// The limits with `per_instance` and `per_scope` waiters and reads every `fallback`.
    pub fn new(per_instance: usize, per_scope: usize, fallback: Duration) -> Self {
        Self {
            per_instance,
            per_scope,
            fallback,
        }
    }
}

/// Why a repeat may not wait.
#[derive(Debug)]
#[non_exhaustive]
pub enum WaitRefused {
    /// As many repeats wait already, on this instance or in this scope, as may.
    Full,
    /// The instance is stopping ([`Wakeups::close`]).
    Stopping,
    /// The key's row could not be marked.
    Store(sqlx::Error),
}

/// What a waiter learns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Woken {
    /// The key's row as read after it changed (or at a fallback read): `None` if it is gone.
    /// Judge it against the request ([`crate::store::judge`]): it may still be running.
    Row(Option<KeyRow>),
    /// The deadline passed without news.
    Deadline,
    /// The instance is stopping: answer the waiter now.
    Stopping,
}

/// One instance's waiters and its listener. Cheap to clone; the listener stops when the
/// last clone is dropped or at [`Wakeups::close`].
#[derive(Clone)]
pub struct Wakeups {
    inner: Arc<Inner>,
}

struct Inner {
    db: PgPool,
    limits: WaitLimits,
    waiting: Mutex<Registry>,
    stopping: watch::Sender<bool>,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups")
            .field("limits", &self.inner.limits)
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl Wakeups {
    /// The waiters of one instance on `db`, within `limits`; starts the listener task (on
    /// the current tokio runtime), which connects to `db` with a connection of its own.
    pub fn start(db: PgPool, limits: WaitLimits) -> Self {
        let (stopping, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            db,
            limits,
            waiting: Mutex::default(),
            stopping,
        });
        tokio::spawn(listener::listen(Arc::downgrade(&inner)));
        Self { inner }
    }

    /// How many repeats wait now on this instance.
    pub fn waiting(&self) -> usize {
        self.inner.registry().total
    }

    /// Answers every waiter [`Woken::Stopping`] and refuses new ones: for a graceful stop,
    /// before the server waits for its requests to end.
    pub fn close(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Registers a wait for `key` in `scope`, whose row was just read as running. The first
    /// waiter of the key on this instance marks the row, so that its completion notifies.
    pub async fn wait_for(&self, scope: &str, key: &str) -> Result<Waiter, WaitRefused> {
        if *self.inner.stopping.borrow() {
            return Err(WaitRefused::Stopping);
        }
        let (waiter, first) = self.register(scope, key)?;
        if first {
            match mark(&self.inner.db, scope, key).await {
                // No longer running, or marked already: what it is now is read once, for
                // every waiter of it (still running: they wait on).
                Ok(false) => self.inner.read_and_tell(&waiter.key).await,
                Ok(true) => {}
                Err(e) => return Err(WaitRefused::Store(e)),
            }
        }
        Ok(waiter)
    }
}

/// Marks a running key's row as waited for; `false` when the row is no longer running (it
/// completed or failed before the mark, or is gone) or was marked already (by another
/// instance's waiter): the caller then reads it. A marked row is not written again, so
/// waiters on many instances do not queue on the row lock the original needs to complete.
async fn mark(db: &PgPool, scope: &str, key: &str) -> Result<bool, sqlx::Error> {
    let marked = sqlx::query(
        "UPDATE idempotency_keys SET awaited = true
          WHERE scope = $1 AND key = $2 AND state = 'processing' AND NOT awaited",
    )
    .bind(scope)
    .bind(key)
    .execute(db)
    .await?;
    Ok(marked.rows_affected() == 1)
}
