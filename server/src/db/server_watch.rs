//! Which database server the connections reach. A restart, a failover or a restore from a
//! backup each bring up a server that may not hold every commit the last one acknowledged
//! (a standby that was behind, a backup older than the last answers): what this process
//! remembers from before — the answer cache's completed answers — may then name work the
//! database no longer holds. Every new connection reads the server's start time; when it
//! differs from the last one seen, the answer cache is emptied there and then, before the
//! connection serves anything (docs/protocol.md, "Repeats from memory").

use std::sync::{Arc, Mutex, PoisonError};

use once_axum::AnswerCache;
use sqlx::PgConnection;

/// Shared by the main pool and the readers. Cheap to clone.
#[derive(Clone, Default)]
pub struct ServerWatch {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The start time (epoch microseconds) of the server last connected to.
    started: Mutex<Option<i64>>,
    /// The answers to forget when the server changes, if the process keeps any.
    answers: Option<AnswerCache>,
}

impl ServerWatch {
    /// A watch that empties `answers` whenever the server changes.
    pub fn forgetting(answers: Option<AnswerCache>) -> Self {
        Self {
            inner: Arc::new(Inner {
                started: Mutex::default(),
                answers,
            }),
        }
    }

    /// Reads the start time of the server `conn` reaches (on each new connection).
    /// A process that keeps no answers has nothing to forget, and asks nothing.
    pub async fn note(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        if self.inner.answers.is_none() {
            return Ok(());
        }
        let started: i64 = sqlx::query_scalar(
            "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint",
        )
        .fetch_one(conn)
        .await?;
        self.observe(started);
        Ok(())
    }

    /// Notes `started`; when it is not the last start time seen, the server changed: the
    /// answers are forgotten and `true` returned.
    fn observe(&self, started: i64) -> bool {
        let mut last = self
            .inner
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let changed = last.is_some_and(|seen| seen != started);
        *last = Some(started);
        if changed {
            tracing::warn!("the database server changed (restart, failover or restore): answers kept in memory are forgotten");
            if let Some(answers) = &self.inner.answers {
                answers.clear();
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_server_is_told_once_and_the_same_server_never() {
        let watch = ServerWatch::default();
        assert!(!watch.observe(1));
        assert!(!watch.observe(1), "the first server and itself again");
        assert!(watch.observe(2));
        assert!(!watch.observe(2), "told once");
    }
}
