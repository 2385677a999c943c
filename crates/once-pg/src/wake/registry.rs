//! The instance's waiters, by key and by scope: where a waiter registers (within the
//! limits), what the listener tells it, and the place it frees when it leaves.

use std::{collections::HashMap, sync::Arc};

use tokio::{sync::watch, time::Instant};

use super::{Inner, WaitRefused, Wakeups, Woken};
use crate::store::KeyRow;

/// A key: its scope and its name.
pub(super) type Key = (String, String);
/// The last read of a key's row told to its waiters (`None`: no read yet).
type Seen = Option<Arc<Option<KeyRow>>>;

#[derive(Default)]
pub(super) struct Registry {
    pub(super) keys: HashMap<Key, Watched>,
    scopes: HashMap<String, usize>,
    pub(super) total: usize,
}

pub(super) struct Watched {
    seen: watch::Sender<Seen>,
    waiters: usize,
}

impl Wakeups {
    pub(super) fn register(&self, scope: &str, key: &str) -> Result<(Waiter, bool), WaitRefused> {
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
    pub(super) key: Key,
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
    pub(super) fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves counts that are still counts.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn watched_keys(&self) -> Vec<Key> {
        self.registry().keys.keys().cloned().collect()
    }

    /// The keys waited for here whose name is `name`, in any scope.
    pub(super) fn watched_keys_named(&self, name: &str) -> Vec<Key> {
        let registry = self.registry();
        registry
            .keys
            .keys()
            .filter(|k| k.1 == name)
            .cloned()
            .collect()
    }

    /// Tells the waiters of `key` what its row holds now.
    pub(super) fn tell(&self, key: &Key, row: Option<KeyRow>) {
        if let Some(watched) = self.registry().keys.get(key) {
            watched.seen.send_replace(Some(Arc::new(row)));
        }
    }
}
