//! The instance's listener: one connection `LISTEN`ing on [`CHANNEL`], and the reads of the
//! keys waited for that it makes on a notification, a reconnection or a fallback tick.

use std::{collections::HashMap, sync::Weak, time::Duration};

use sqlx::{
    postgres::{PgListener, PgPoolOptions},
    PgPool,
};

use super::{registry::Key, Inner, CHANNEL};
use crate::store::{key_row, KeyRow};

/// How soon the listener tries again after failing to connect (or the fallback, if
/// shorter): a reconnection reads every key waited for, so it should not wait for a tick.
const RECONNECT: Duration = Duration::from_secs(1);

impl Inner {
    pub(super) async fn read_and_tell(&self, key: &Key) {
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
    /// A key of this name finished, in some scope (the payload names no scope).
    Finished(String),
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
pub(super) async fn listen(inner: Weak<Inner>) {
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
                    Ok(Some(n)) => Heard::Finished(n.payload().to_owned()),
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
            // Every scope's key of that name waited for here: usually one.
            Heard::Finished(name) => inner.watched_keys_named(&name),
            Heard::Lost | Heard::Tick => inner.watched_keys(),
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
