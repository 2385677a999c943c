//! The read a keyed request starts with: what the table holds for its key, and, in the same
//! statement, one yes-or-no question of the application's about the request's scope (does
//! the session exist?), so a repeat of a known key costs one round trip and no lock.

use std::time::Duration;

use once_core::IdempotentRequest;
use sqlx::{PgExecutor, Row};

use crate::store::{judge, Existing, KeyRow};

/// A prepared form of the first read, made once at start.
///
/// ```
/// let read = once_pg::FirstRead::with_scope_check(
///     "EXISTS (SELECT 1 FROM sessions s WHERE s.id = $1 AND s.expires_at > now())",
/// );
/// assert!(read.sql().contains("sessions"));
/// ```
#[derive(Clone, Debug)]
pub struct FirstRead {
    sql: String,
}

/// What a first read found.
#[derive(Debug)]
#[non_exhaustive]
pub struct FirstReadRow {
    /// The application's answer about the scope (`true` without a check).
    pub scope_known: bool,
    /// What the table holds for the request's key, judged against the request.
    pub existing: Existing,
    /// How long ago the key's request finished, by the database's clock (a finished key
    /// only): with the retention, how long its stored answer is still kept.
    pub finished_ago: Option<Duration>,
    /// How much longer the scope stays known, from [`FirstRead::with_scope_expiry`]:
    /// `Some(ZERO)` from a yes-or-no check, which cannot say; `None` without a check (a
    /// scope that never ends).
    pub scope_lasts: Option<Duration>,
}

impl FirstRead {
    /// The key's row alone.
    pub fn plain() -> Self {
        Self::with_columns("NULL::timestamptz", "true", "NULL::bigint")
    }

    /// The key's row and `scope_check`, a boolean SQL expression over `$1` (the request's
    /// scope) evaluated in the same statement; NULL counts as false. It is a constant of the
    /// application's, never text built from a request.
    pub fn with_scope_check(scope_check: &'static str) -> Self {
        let known = format!("coalesce(({scope_check}), false)");
        Self::with_columns("NULL::timestamptz", &known, "0::bigint")
    }

    /// The key's row and `scope_expiry`, a `timestamptz` SQL expression over `$1` (the
    /// request's scope): when the scope stops being known (NULL: it is not known now, and
    /// lasts no time). The
    /// scope is known while that time is ahead, and [`FirstReadRow::scope_lasts`] says for
    /// how long, so an answer kept in memory is never given past it. A constant of the
    /// application's, never text built from a request.
    ///
    /// ```
    /// let read = once_pg::FirstRead::with_scope_expiry(
    ///     "(SELECT s.expires_at FROM sessions s WHERE s.id = $1)",
    /// );
    /// assert!(read.sql().contains("sessions"));
    /// ```
    pub fn with_scope_expiry(scope_expiry: &'static str) -> Self {
        Self::with_columns(
            scope_expiry,
            "coalesce(u.until > now(), false)",
            "coalesce(floor(extract(epoch FROM u.until - now()) * 1000)::bigint, 0)",
        )
    }

    /// The statement: the scope's columns come from `until` (`u.until`, evaluated once).
    fn with_columns(until: &str, scope_known: &str, scope_left_ms: &str) -> Self {
        let sql = format!(
            "SELECT {scope_known} AS scope_known, {scope_left_ms} AS scope_left_ms,
                    k.route, k.fingerprint, k.state,
                    coalesce(k.locked_until > now(), false) AS lease_valid,
                    k.response_status, k.response_headers, k.response_body,
                    ceil(extract(epoch FROM now() - k.finished_at) * 1000)::bigint AS finished_ago_ms
               FROM (SELECT ({until}) AS until) AS u
               LEFT JOIN idempotency_keys k ON k.scope = $1 AND k.key = $2"
        );
        Self { sql }
    }

    /// The statement, as sent.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Runs the read for `req`.
    pub async fn run(
        &self,
        db: impl PgExecutor<'_>,
        req: &IdempotentRequest,
    ) -> Result<FirstReadRow, sqlx::Error> {
        let row = sqlx::query(&self.sql)
            .bind(&req.scope)
            .bind(req.key.as_str())
            .fetch_one(db)
            .await?;
        let route: Option<String> = row.try_get("route")?;
        let key = match route {
            Some(route) => Some(KeyRow {
                route,
                fingerprint: row.try_get("fingerprint")?,
                state: row.try_get("state")?,
                lease_valid: row.try_get("lease_valid")?,
                response_status: row.try_get("response_status")?,
                response_headers: row.try_get("response_headers")?,
                response_body: row.try_get("response_body")?,
            }),
            None => None,
        };
        Ok(FirstReadRow {
            scope_known: row.try_get("scope_known")?,
            existing: judge(key, req),
            finished_ago: millis(row.try_get("finished_ago_ms")?),
            scope_lasts: millis(row.try_get("scope_left_ms")?),
        })
    }
}

/// A span the database measured in milliseconds; a negative one (clocks) counts as none.
fn millis(ms: Option<i64>) -> Option<Duration> {
    ms.map(|ms| Duration::from_millis(ms.max(0) as u64))
}
