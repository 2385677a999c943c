//! A few connections kept aside for the one read every idempotent request starts with
//! (docs/design.md, "Read first").
//!
//! sqlx's pool pings every connection as it takes it back (in a task of its own), to catch
//! one that a cancelled future left in the middle of a statement: for a repeat, whose whole
//! cost is one indexed read, a second round trip of database work. A reader whose statement
//! completed goes back here without a ping: it is clean by construction. One dropped without
//! `done` (an error, a cancelled request) keeps its permit until a ping shows the database
//! finished with it, so there are never more than `READERS` backends, even while clients
//! give up on slow reads; it is reused if the ping succeeds, closed otherwise.

use std::{
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use sqlx::{postgres::PgConnectOptions, ConnectOptions, Connection, PgConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    lost_one_recently, note_lost_connection, note_possible_loss, ServerWatch, PING_AFTER_IDLE,
};

/// How many reads run at once, per process. A read takes a fraction of a millisecond, so a
/// handful keeps up with far more concurrent requests.
const READERS: usize = 8;
/// As long as the main pool waits for a connection (permit, ping and connect together)
/// before the request gets its 503.
const WAIT_AT_MOST: Duration = Duration::from_secs(3);
/// An idle reader older than this is closed, as the main pool closes its idle connections.
const IDLE_AT_MOST: Duration = Duration::from_secs(600);

/// The connections, and the permits that bound them. Cheap to clone.
#[derive(Clone)]
pub struct Readers {
    inner: Arc<Inner>,
}

struct Inner {
    options: PgConnectOptions,
    watch: ServerWatch,
    /// How long an abandoned statement can still run: the statement timeout, plus a margin.
    settle_within: Duration,
    idle: Mutex<Vec<Idle>>,
    permits: Arc<Semaphore>,
}

impl Inner {
    fn idle(&self) -> MutexGuard<'_, Vec<Idle>> {
        // Nothing panics while holding it; if something did, the list is still sound.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn give_back(&self, conn: PgConnection) {
        let mut idle = self.idle();
        idle.retain(|i| i.since.elapsed() < IDLE_AT_MOST);
        idle.push(Idle {
            conn,
            since: Instant::now(),
        });
    }
}

struct Idle {
    conn: PgConnection,
    since: Instant,
}

/// One connection, lent for one statement. `done` gives it back; dropped without `done`
/// (an error, a cancelled request), it is checked first (see the module documentation).
pub struct Reader {
    conn: Option<PgConnection>,
    inner: Arc<Inner>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Readers {
    /// Connects lazily, with `options`: the main pool's, so the same limits apply.
    /// `statement_timeout` is theirs too.
    /// Each new connection tells `watch` which server it reached.
    pub fn new(options: PgConnectOptions, statement_timeout: Duration, watch: ServerWatch) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                watch,
                settle_within: statement_timeout + Duration::from_secs(1),
                idle: Mutex::new(Vec::with_capacity(READERS)),
                permits: Arc::new(Semaphore::new(READERS)),
            }),
        }
    }

    /// A connection that works, or the error to answer 503 with. Like the main pool
    /// (`db::connect`), it pings only a connection that sat idle, or every one for a while
    /// after a connection was found dead.
    pub async fn acquire(&self) -> Result<Reader, sqlx::Error> {
        tokio::time::timeout(WAIT_AT_MOST, self.acquire_unbounded())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    async fn acquire_unbounded(&self) -> Result<Reader, sqlx::Error> {
        let permit = self
            .inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let conn = loop {
            let Some(mut idle) = self.take_idle() else {
                break self.connect().await?;
            };
            if idle.since.elapsed() < PING_AFTER_IDLE && !lost_one_recently() {
                break idle.conn;
            }
            match idle.conn.ping().await {
                Ok(()) => break idle.conn,
                // Dead: its siblings are checked from now on; try the next one.
                Err(e) => note_lost_connection(&e),
            }
        };
        Ok(Reader {
            conn: Some(conn),
            inner: self.inner.clone(),
            permit: Some(permit),
        })
    }

    /// A new connection. When none can be opened (the database restarts, or refuses
    /// connections), the pool's connections are most likely gone too: from now on the pool
    /// checks each before handing it out, so the request's retry does not meet a dead one.
    async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        let mut conn = self
            .inner
            .options
            .connect()
            .await
            .inspect_err(|_| note_possible_loss())?;
        self.inner.watch.note(&mut conn).await?;
        Ok(conn)
    }

    fn take_idle(&self) -> Option<Idle> {
        let mut idle = self.inner.idle();
        idle.retain(|i| i.since.elapsed() < IDLE_AT_MOST);
        idle.pop()
    }
}

impl Reader {
    /// How long a statement on this reader may take before the caller stops waiting: the
    /// statement timeout plus a margin, so a database that vanished without a reset (no
    /// answer, no error) cannot hold a reader, and a request, forever.
    pub fn answer_within(&self) -> Duration {
        self.inner.settle_within
    }

    pub fn conn(&mut self) -> &mut PgConnection {
        self.conn
            .as_mut()
            .expect("a reader holds its connection until done")
    }

    /// Gives the connection back after a statement that completed (and only then: it goes
    /// back unchecked).
    pub fn done(mut self) {
        if let Some(conn) = self.conn.take() {
            self.inner.give_back(conn);
        }
    }
}

impl Drop for Reader {
    /// Without `done`, the connection may be mid-statement: the permit stays taken until a
    /// ping answers (the database finished with it) or the statement's time is surely up.
    fn drop(&mut self) {
        let (Some(mut conn), Some(permit)) = (self.conn.take(), self.permit.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // outside any runtime (never in the server): closed at once
        };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            let settled = tokio::time::timeout(inner.settle_within, conn.ping()).await;
            if let Ok(Ok(())) = settled {
                inner.give_back(conn);
            }
            drop(permit);
        });
    }
}
