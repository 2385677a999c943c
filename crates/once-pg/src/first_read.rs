//! The read a keyed request starts with: what the table holds for its key, and, in the same
//! statement, one yes-or-no question of the application's about the request's scope (does
//! the session exist?), so a repeat of a known key costs one round trip and no lock.

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
}

impl FirstRead {
    /// The key's row alone.
    pub fn plain() -> Self {
        Self::with_scope_check("true")
    }

    /// The key's row and `scope_check`, a boolean SQL expression over `$1` (the request's
    /// scope) evaluated in the same statement; NULL counts as false. It is a constant of the
    /// application's, never text built from a request.
    pub fn with_scope_check(scope_check: &'static str) -> Self {
        let sql = format!(
            "SELECT coalesce(({scope_check}), false) AS scope_known,
                    k.route, k.fingerprint, k.state,
                    coalesce(k.locked_until > now(), false) AS lease_valid,
                    k.response_status, k.response_headers, k.response_body
               FROM (VALUES (1)) AS one (n)
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
        })
    }
}
