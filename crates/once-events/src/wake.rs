//! Waking a worker when there is work: `LISTEN` on a channel that a trigger notifies at
//! commit, with polling as the fallback. Notifications sent while the listener is down
//! (a lost connection, a restart) are gone for good, so a worker never relies on them: it
//! looks for work at least every `poll` anyway.

use std::time::Duration;

use sqlx::{postgres::PgListener, PgPool};

/// A worker's wait for work on one notification channel, with polling as the fallback.
pub struct Wakeup {
    db: PgPool,
    channel: &'static str,
    poll: Duration,
    listener: Option<PgListener>,
}

impl Wakeup {
    /// Listens on `channel` of `db` (connecting on the first wait) and waits at most `poll`.
    pub fn new(db: PgPool, channel: &'static str, poll: Duration) -> Self {
        Self {
            db,
            channel,
            poll,
            listener: None,
        }
    }

    /// Returns when the channel is notified, or after `poll` (or `limit`, if shorter).
    pub async fn wait(&mut self, limit: Duration) {
        let limit = limit.min(self.poll);
        if self.listener.is_none() {
            self.listener = self.listen().await;
        }
        let Some(listener) = self.listener.as_mut() else {
            tokio::time::sleep(limit).await;
            return;
        };
        match tokio::time::timeout(limit, listener.recv()).await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => {
                tracing::warn!(channel = self.channel, error = %e, "listener lost; polling until it is back");
                self.listener = None;
                tokio::time::sleep(limit).await;
            }
        }
    }

    async fn listen(&self) -> Option<PgListener> {
        let mut listener = PgListener::connect_with(&self.db).await.ok()?;
        listener.listen(self.channel).await.ok()?;
        Some(listener)
    }
}
