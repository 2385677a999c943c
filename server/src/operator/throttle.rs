//! The login throttle (docs/design.md, "The operator console"). Every login attempt is
//! counted in the database before its password is checked, under its client address and
//! under `*`, every client at once: simultaneous attempts cannot slip past the count, and
//! every instance on the database sees the same counts. The attempt that reaches a limit
//! locks its row; until the lock ends, attempts are refused without their password being
//! looked at, so a right guess during a lockout logs no one in. A successful login deletes
//! its address's row. A browser that logged in before is counted under itself instead
//! (`admit_browser`), so the operator always gets in from it.

use std::time::Duration;

use axum::{extract::FromRequestParts, http::request::Parts};
use sqlx::{PgConnection, PgPool};

use crate::{client_addr::ClientBucket, config::LoginLimits, metrics::Metrics, state::AppState};

/// The row that counts every client's attempts together (no address is spelled so).
const EVERY_CLIENT: &str = "*";

/// A login attempt's client, as its row names it.
pub struct Client(pub String);

/// The client's address by the shop's rule (`crate::client_addr`): the peer, or the address
/// a trusted proxy names.
impl FromRequestParts<AppState> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let ClientBucket(bucket) = ClientBucket::from_request_parts(parts, state).await?;
        Ok(Self(bucket.unwrap_or_else(|| "unknown".to_owned())))
    }
}

/// One limit: at most `max` attempts within `window`; the attempt that reaches it locks
/// the row for `lockout`, doubled for every lock the row had before, up to `cap`.
struct Rule {
    max: u32,
    window: Duration,
    lockout: Duration,
    cap: Duration,
}

impl Rule {
    fn per_address(limits: &LoginLimits) -> Self {
        Self {
            max: limits.max_failures,
            window: limits.window,
            lockout: limits.lockout,
            cap: limits.lockout_cap,
        }
    }

    fn every_client(limits: &LoginLimits) -> Self {
        Self {
            max: limits.global_max_failures,
            window: limits.global_window,
            lockout: limits.global_lockout,
            cap: limits.global_lockout,
        }
    }
}

/// What the throttle says of an attempt.
pub enum Admission {
    /// Its password may be checked; it began these locks.
    Checked(Locks),
    /// Refused unchecked: a lock holds for this many more seconds.
    Refused { retry_after_secs: u64 },
}

/// The locks an admitted attempt began, in seconds: its address's (lifted again if its
/// password is right) and every client's.
#[derive(Debug, Default)]
pub struct Locks {
    pub address: Option<u64>,
    pub every_client: Option<u64>,
}

/// Counts an attempt from `client`, or refuses it while a lock holds. The two counts are
/// one transaction: an attempt refused for every client is not counted against its
/// address. Rows are always taken in the same order (address, then `*`).
pub async fn admit(
    db: &PgPool,
    client: &str,
    limits: &LoginLimits,
) -> Result<Admission, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(address) = count(&mut tx, client, &Rule::per_address(limits)).await? else {
        tx.rollback().await?;
        return refused(db, client).await;
    };
    let Some(every_client) = count(&mut tx, EVERY_CLIENT, &Rule::every_client(limits)).await?
    else {
        tx.rollback().await?;
        return refused(db, EVERY_CLIENT).await;
    };
    tx.commit().await?;
    Ok(Admission::Checked(Locks {
        address,
        every_client,
    }))
}

/// Counts an attempt from a known browser (`super::browsers`) under `browser` alone, by the
/// rule of one address: neither its address's lock nor every client's holds it back, only
/// its own.
pub async fn admit_browser(
    db: &PgPool,
    browser: &str,
    limits: &LoginLimits,
) -> Result<Admission, sqlx::Error> {
    let mut conn = db.acquire().await?;
    match count(&mut conn, browser, &Rule::per_address(limits)).await? {
        Some(lock) => Ok(Admission::Checked(Locks {
            address: lock,
            every_client: None,
        })),
        None => refused(db, browser).await,
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// One attempt under `client`, in one statement: `None` while the row is locked (nothing
/// changes), else the seconds of the lock this attempt began, if it began one. The count
/// goes on while the row's window lasts and no lock has ended since it began; otherwise
/// this attempt is the first of a new window. The count reaching the limit sets the lock.
async fn count(
    conn: &mut PgConnection,
    client: &str,
    rule: &Rule,
) -> Result<Option<Option<u64>>, sqlx::Error> {
    let max = i32::try_from(rule.max).unwrap_or(i32::MAX);
    let locked = sqlx::query_scalar!(
        r#"INSERT INTO operator_login_failures AS f
                  (client, failures, window_started_at, locked_until, lockouts)
           VALUES ($1, 1, now(),
                   CASE WHEN 1 >= $2::int THEN now() + $4::bigint * interval '1 millisecond' END,
                   CASE WHEN 1 >= $2::int THEN 1 ELSE 0 END)
           ON CONFLICT (client) DO UPDATE SET
               failures = CASE
                   WHEN f.locked_until IS NULL
                    AND f.window_started_at > now() - $3::bigint * interval '1 millisecond'
                   THEN f.failures + 1 ELSE 1 END,
               window_started_at = CASE
                   WHEN f.locked_until IS NULL
                    AND f.window_started_at > now() - $3::bigint * interval '1 millisecond'
                   THEN f.window_started_at ELSE now() END,
               locked_until = CASE
                   WHEN CASE
                       WHEN f.locked_until IS NULL
                        AND f.window_started_at > now() - $3::bigint * interval '1 millisecond'
                       THEN f.failures + 1 ELSE 1 END >= $2::int
                   THEN now() + least(
                       $4::bigint * interval '1 millisecond' * power(2.0::float8, least(f.lockouts, 20)),
                       $5::bigint * interval '1 millisecond')
                   END,
               lockouts = f.lockouts + CASE
                   WHEN CASE
                       WHEN f.locked_until IS NULL
                        AND f.window_started_at > now() - $3::bigint * interval '1 millisecond'
                       THEN f.failures + 1 ELSE 1 END >= $2::int
                   THEN 1 ELSE 0 END
           WHERE f.locked_until IS NULL OR f.locked_until <= now()
           RETURNING ceil(extract(epoch FROM locked_until - now()))::bigint AS lock_secs"#,
        client,
        max,
        millis(rule.window),
        millis(rule.lockout),
        millis(rule.cap),
    )
    .fetch_optional(conn)
    .await?;
    Ok(locked.map(|secs| secs.map(|s| s.max(1) as u64)))
}

/// The refusal while `client`'s lock holds, with the seconds left of it.
async fn refused(db: &PgPool, client: &str) -> Result<Admission, sqlx::Error> {
    let secs = sqlx::query_scalar!(
        "SELECT ceil(extract(epoch FROM locked_until - now()))::bigint
           FROM operator_login_failures WHERE client = $1",
        client
    )
    .fetch_optional(db)
    .await?
    .flatten();
    Ok(Admission::Refused {
        retry_after_secs: secs.unwrap_or(1).max(1) as u64,
    })
}

/// After a successful login: the address starts afresh.
pub async fn forget(db: &PgPool, client: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM operator_login_failures WHERE client = $1",
        client
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets addresses quiet for a day (no window begun, no lock held since): the table
/// does not grow with every address that ever tried, and their doubling starts over.
pub async fn forget_quiet(db: &PgPool) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!(
        "DELETE FROM operator_login_failures
          WHERE greatest(locked_until, window_started_at) < now() - interval '1 day'"
    )
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}

/// Counts and logs what an admitted attempt came to: every wrong password, and once each
/// lock it began (its address's only if the password was wrong: a right one lifts it).
pub fn report(metrics: &Metrics, client: &str, locks: &Locks, right: bool) {
    if !right {
        Metrics::inc(&metrics.login_failures);
        tracing::info!(client, "operator console: a wrong password was given");
    }
    if let Some(secs) = locks.address.filter(|_| !right) {
        Metrics::inc(&metrics.login_lockouts);
        tracing::warn!(
            client,
            locked_for_secs = secs,
            "operator console: too many failed logins; this client is locked out"
        );
    }
    if let Some(secs) = locks.every_client {
        Metrics::inc(&metrics.login_lockouts);
        tracing::warn!(
            locked_for_secs = secs,
            "operator console: too many failed logins from all clients; every login is locked out"
        );
    }
}
