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

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use sqlx::{
    postgres::{PgListener, PgPoolOptions},
    PgPool,
};
use tokio::{sync::watch, time::Instant};

use crate::store::{key_row, KeyRow};

/// The notification channel of completed and failed keys that a repeat waits for; each
/// payload is a JSON array `[scope, key]`, or `[]` for "read every key again".
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

type Key = (String, String);

/// How soon the listener tries again after failing to connect (or the fallback, if
/// shorter): a reconnection reads every key waited for, so it should not wait for a tick.
const RECONNECT: Duration = Duration::from_secs(1);
type Seen = Option<Arc<Option<KeyRow>>>;

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

#[derive(Default)]
struct Registry {
    keys: HashMap<Key, Watched>,
    scopes: HashMap<String, usize>,
    total: usize,
}

struct Watched {
    seen: watch::Sender<Seen>,
    waiters: usize,
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
        tokio::spawn(listen(Arc::downgrade(&inner)));
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
                // No longer running: what it is now is read once, for every waiter of it.
                Ok(false) => self.inner.read_and_tell(&waiter.key).await,
                Ok(true) => {}
                Err(e) => return Err(WaitRefused::Store(e)),
            }
        }
        Ok(waiter)
    }

    fn register(&self, scope: &str, key: &str) -> Result<(Waiter, bool), WaitRefused> {
        let limits = &self.inner.limits;
        let mut registry = self.inner.registry();
        let of_scope = registry.scopes.get(scope).copied().unwrap_or(0);
        if registry.total >= limits.per_instance || of_scope >= limits.per_scope {
            return Err(WaitRefused::Full);
        }
        registry.total += 1;
        *registry.scopes.entry(scope.to_owned()).or_default() += 1;
        let id = (scope.to_owned(), key.to_owned());
        let first = !registry.keys.contains_key(&id);
        let watched = registry.keys.entry(id.clone()).or_insert_with(|| Watched {
            seen: watch::channel(None).0,
            waiters: 0,
        });
        watched.waiters += 1;
        let seen = watched.seen.subscribe();
        drop(registry);
        let waiter = Waiter {
            wakeups: Arc::clone(&self.inner),
            key: id,
            seen,
            stopping: self.inner.stopping.subscribe(),
            joined: !first,
        };
        Ok((waiter, first))
    }
}

/// One repeat's wait for its key's request; leaving (dropping it) frees its place.
pub struct Waiter {
    wakeups: Arc<Inner>,
    key: Key,
    seen: watch::Receiver<Seen>,
    stopping: watch::Receiver<bool>,
    joined: bool,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").field("key", &self.key).finish()
    }
}

impl Waiter {
    /// The next news of the key: a read of its row (the first one at once if the row was
    /// read since this waiter registered), the deadline, or the instance stopping.
    pub async fn next(&mut self, deadline: Instant) -> Woken {
        if *self.stopping.borrow_and_update() {
            return Woken::Stopping;
        }
        // A waiter that joins a key already read takes that read first: it may be the
        // completion, published between this waiter's own read and its registration.
        let joined = std::mem::take(&mut self.joined);
        if joined || self.seen.has_changed().unwrap_or(false) {
            if let Some(row) = self.seen.borrow_and_update().clone() {
                return Woken::Row((*row).clone());
            }
        }
        tokio::select! {
            changed = self.seen.changed() => match (changed, self.seen.borrow_and_update().clone()) {
                (Ok(()), Some(row)) => Woken::Row((*row).clone()),
                // Unreachable while we hold the registry's entry; answer as at the deadline.
                _ => Woken::Deadline,
            },
            _ = self.stopping.changed() => Woken::Stopping,
            _ = tokio::time::sleep_until(deadline) => Woken::Deadline,
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut registry = self.wakeups.registry();
        registry.total -= 1;
        let scope = &self.key.0;
        if let Some(count) = registry.scopes.get_mut(scope) {
            *count -= 1;
            if *count == 0 {
                registry.scopes.remove(scope);
            }
        }
        if let Some(watched) = registry.keys.get_mut(&self.key) {
            watched.waiters -= 1;
            if watched.waiters == 0 {
                registry.keys.remove(&self.key);
            }
        }
    }
}

impl Inner {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves counts that are still counts.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watched_keys(&self) -> Vec<Key> {
        self.registry().keys.keys().cloned().collect()
    }

    /// Tells the waiters of `key` what its row holds now.
    fn tell(&self, key: &Key, row: Option<KeyRow>) {
        if let Some(watched) = self.registry().keys.get(key) {
            watched.seen.send_replace(Some(Arc::new(row)));
        }
    }

    async fn read_and_tell(&self, key: &Key) {
        if let Err(e) = self.read_and_tell_all(std::slice::from_ref(key)).await {
            tracing::warn!(error = %e, "could not read a key waited for; the fallback reads it");
        }
    }

    /// One read of the rows of `keys`, told to their waiters.
    async fn read_and_tell_all(&self, keys: &[Key]) -> Result<(), sqlx::Error> {
        if let [(scope, key)] = keys {
            let row = key_row(&self.db, scope, key).await?;
            self.tell(&keys[0], row);
            return Ok(());
        }
        let mut rows = rows_of(&self.db, keys).await?;
        for key in keys {
            self.tell(key, rows.remove(key));
        }
        Ok(())
    }
}

/// Marks a running key's row as waited for; `false` when the row is no longer running (it
/// completed or failed before the mark, or is gone).
async fn mark(db: &PgPool, scope: &str, key: &str) -> Result<bool, sqlx::Error> {
    let marked = sqlx::query(
        "UPDATE idempotency_keys SET awaited = true
          WHERE scope = $1 AND key = $2 AND state = 'processing'",
    )
    .bind(scope)
    .bind(key)
    .execute(db)
    .await?;
    Ok(marked.rows_affected() == 1)
}

#[derive(sqlx::FromRow)]
struct Found {
    scope: String,
    key: String,
    #[sqlx(flatten)]
    row: KeyRow,
}

/// The rows of `keys`, in one statement.
async fn rows_of(db: &PgPool, keys: &[Key]) -> Result<HashMap<Key, KeyRow>, sqlx::Error> {
    let (scopes, names): (Vec<&str>, Vec<&str>) =
        keys.iter().map(|(s, k)| (s.as_str(), k.as_str())).unzip();
    let found: Vec<Found> = sqlx::query_as(
        "SELECT k.scope, k.key, route, fingerprint, state,
                coalesce(locked_until > now(), false) AS lease_valid,
                response_status, response_headers, response_body
           FROM idempotency_keys k
           JOIN unnest($1::text[], $2::text[]) AS w(scope, key) ON k.scope = w.scope AND k.key = w.key",
    )
    .bind(scopes)
    .bind(names)
    .fetch_all(db)
    .await?;
    Ok(found
        .into_iter()
        .map(|f| ((f.scope, f.key), f.row))
        .collect())
}

/// What the listener task hears.
enum Heard {
    /// Keys finished (parsed from a payload); `None`: read every key again.
    Finished(Option<Key>),
    /// Notifications may have been lost (the connection dropped, or none yet).
    Lost,
    /// The fallback read is due.
    Tick,
    /// Time to try connecting again.
    Nothing,
    /// Close, or the last handle is gone.
    Stop,
}

/// The instance's listener: one connection `LISTEN`ing on [`CHANNEL`], turning each
/// notification for a key waited for here into one read, and reading every key waited for
/// after a reconnection and at each fallback tick.
async fn listen(inner: Weak<Inner>) {
    let Some((db, fallback, mut stopping)) = inner
        .upgrade()
        .map(|i| (i.db.clone(), i.limits.fallback, i.stopping.subscribe()))
    else {
        return;
    };
    let mut listener: Option<PgListener> = None;
    let mut tick = tokio::time::interval(fallback);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let heard = match listener.as_mut() {
            None => {
                listener = connect(&db).await;
                if listener.is_none() {
                    tokio::select! {
                        _ = tick.tick() => Heard::Tick,
                        _ = tokio::time::sleep(fallback.min(RECONNECT)) => Heard::Nothing,
                        _ = stopping.changed() => Heard::Stop,
                    }
                } else {
                    Heard::Lost
                }
            }
            Some(l) => tokio::select! {
                heard = l.try_recv() => match heard {
                    Ok(Some(n)) => Heard::Finished(parse(n.payload())),
                    Ok(None) => Heard::Lost,
                    Err(e) => {
                        tracing::warn!(error = %e, "the key listener lost its connection; reading waited keys until it is back");
                        listener = None;
                        Heard::Lost
                    }
                },
                _ = tick.tick() => Heard::Tick,
                _ = stopping.changed() => Heard::Stop,
            },
        };
        let Some(inner) = inner.upgrade() else { return };
        if *inner.stopping.borrow() {
            return;
        }
        let keys = match heard {
            Heard::Stop => return,
            Heard::Nothing => continue,
            Heard::Finished(Some(key)) => vec![key],
            Heard::Finished(None) | Heard::Lost | Heard::Tick => inner.watched_keys(),
        };
        let keys: Vec<Key> = {
            let registry = inner.registry();
            keys.into_iter()
                .filter(|k| registry.keys.contains_key(k))
                .collect()
        };
        if !keys.is_empty() {
            if let Err(e) = inner.read_and_tell_all(&keys).await {
                tracing::warn!(error = %e, "could not read the keys waited for; trying at the next tick");
            }
        }
    }
}

/// The listener, on a connection of its own (a pool of one, as `PgListener::connect`
/// makes): it takes none of the application's connections, and a reconnection is a new
/// connection, not an idle one of the application's pool.
async fn connect(db: &PgPool) -> Option<PgListener> {
    let connected = async {
        let own = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(RECONNECT)
            .connect_with((*db.connect_options()).clone())
            .await?;
        let mut listener = PgListener::connect_with(&own).await?;
        listener.listen(CHANNEL).await?;
        Ok::<_, sqlx::Error>(listener)
    };
    match connected.await {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::warn!(error = %e, "the key listener cannot connect; reading waited keys at each tick");
            None
        }
    }
}

/// The key a payload names; `None` for `[]` or anything else: read every key again.
fn parse(payload: &str) -> Option<Key> {
    let [scope, key]: [String; 2] = serde_json::from_str(payload).ok()?;
    Some((scope, key))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_payload_names_one_key_or_asks_for_all() {
        assert_eq!(
            parse(r#"["shopper \"1\"", "k-1"]"#),
            Some(("shopper \"1\"".into(), "k-1".into()))
        );
        assert_eq!(parse("[]"), None);
        assert_eq!(parse("garbage"), None);
    }
}
