//! Which database server the connections reach. A restart, a failover or a restore from a
//! backup each bring up a server that may not hold every commit the last one acknowledged
//! (a standby that was behind, a backup older than the last answers): what this process
//! remembers from before — the answer cache's completed answers — may then name work the
//! database no longer holds. Every new connection reads the server's start time; when it
//! differs from the last one seen, the change is counted, and the answer cache is emptied
//! before the next request uses it (`idempotency`; docs/protocol.md, "Repeats from memory").

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex, PoisonError,
};

use sqlx::PgConnection;

/// Shared by the main pool, the readers and the executor of each request. Cheap to clone.
#[derive(Clone, Default)]
pub struct ServerWatch {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The start time (epoch microseconds) of the server last connected to.
    started: Mutex<Option<i64>>,
    /// Changes of server seen, and how many of them the cache's owner was told of.
    changes: AtomicU64,
    told: AtomicU64,
}

impl ServerWatch {
    /// Reads the start time of the server `conn` reaches (on each new connection).
    pub async fn note(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        let started: i64 = sqlx::query_scalar(
            "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint",
        )
        .fetch_one(conn)
        .await?;
        self.observe(started);
        Ok(())
    }

    /// Counts a change when `started` is not the last start time seen.
    fn observe(&self, started: i64) {
        let mut last = self
            .inner
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|seen| seen != started) {
            self.inner.changes.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("the database server changed (restart, failover or restore): answers kept in memory are forgotten");
        }
        *last = Some(started);
    }

    /// Whether the server changed since the last call that said so: true once per change.
    pub fn changed_since_last_asked(&self) -> bool {
        let changes = self.inner.changes.load(Ordering::Relaxed);
        let told = self.inner.told.load(Ordering::Relaxed);
        changes != told
            && self
                .inner
                .told
                .compare_exchange(told, changes, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_server_is_told_once_and_the_same_server_never() {
        let watch = ServerWatch::default();
        watch.observe(1);
        watch.observe(1);
        assert!(
            !watch.changed_since_last_asked(),
            "the first server and itself again"
        );
        watch.observe(2);
        assert!(watch.changed_since_last_asked());
        assert!(!watch.changed_since_last_asked(), "told once");
        watch.observe(2);
        assert!(!watch.changed_since_last_asked());
    }
}
