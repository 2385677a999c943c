//! A few connections kept aside for the one read every idempotent request starts with
//! (docs/design.md, "Read first").
//!
//! sqlx's pool pings every connection as it takes it back: a round trip to the database, to
//! catch a connection that a cancelled future left in the middle of a statement. For a
//! repeat, whose whole cost is one indexed read, that ping doubled the round trips. A
//! connection goes back here only after its statement completed, so it is clean by
//! construction and needs no ping; one whose statement failed or was cancelled is closed.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use sqlx::{postgres::PgConnectOptions, ConnectOptions, Connection, PgConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{lost_one_recently, note_lost_connection, PING_AFTER_IDLE};

/// How many reads run at once, per process. A read takes a fraction of a millisecond, so a
/// handful keeps up with far more concurrent requests.
const READERS: usize = 8;
/// As long as the main pool waits for a connection before the request gets its 503.
const WAIT_AT_MOST: Duration = Duration::from_secs(3);

/// The connections, and the permits that bound them. Cheap to clone.
#[derive(Clone)]
pub struct Readers {
    inner: Arc<Inner>,
}

struct Inner {
    options: PgConnectOptions,
    idle: Mutex<Vec<Idle>>,
    permits: Arc<Semaphore>,
}

struct Idle {
    conn: PgConnection,
    since: Instant,
}

/// One connection, lent for one statement. `done` gives it back; dropped without `done`
/// (an error, a cancelled request), it is closed.
pub struct Reader {
    conn: Option<PgConnection>,
    inner: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
}

impl Readers {
    /// Connects lazily, with the same options (and so the same limits) as `pool`.
    pub fn new(options: PgConnectOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                idle: Mutex::new(Vec::with_capacity(READERS)),
                permits: Arc::new(Semaphore::new(READERS)),
            }),
        }
    }

    /// A connection that works, or the error to answer 503 with. Like the main pool
    /// (`db::connect`), it pings only a connection that sat idle, or every one for a while
    /// after a connection was found dead.
    pub async fn acquire(&self) -> Result<Reader, sqlx::Error> {
        let permit = tokio::time::timeout(WAIT_AT_MOST, self.inner.permits.clone().acquire_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let conn = loop {
            let Some(mut idle) = self.take_idle() else {
                break self.inner.options.connect().await?;
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
            _permit: permit,
        })
    }

    fn take_idle(&self) -> Option<Idle> {
        self.inner.idle.lock().ok()?.pop()
    }
}

impl Reader {
    pub fn conn(&mut self) -> &mut PgConnection {
        self.conn
            .as_mut()
            .expect("a reader holds its connection until done")
    }

    /// Gives the connection back after a statement that completed.
    pub fn done(mut self) {
        if let (Some(conn), Ok(mut idle)) = (self.conn.take(), self.inner.idle.lock()) {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }
}
