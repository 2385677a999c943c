//! The `idempotency_keys` table: every state transition is one SQL statement, and the
//! database decides every race (the unique constraint, and `WHERE lease_token = $mine`).
//!
//! ```text
//! (absent) --claim--> processing(lease) --complete (fenced)--> completed
//! processing --fail--> failed --claim again--> processing(new lease)
//! processing --lease expired + same request--> processing(new lease)   (takeover)
//! ```

use std::time::Duration;

use once_core::{IdempotencyKey, IdempotentRequest, StoredResponse};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

/// What the table says about a key that someone already holds.
#[derive(Debug)]
#[non_exhaustive]
pub enum Existing {
    /// The key's request completed: its stored answer, to replay.
    Completed(StoredResponse),
    /// The same request is running under a valid lease.
    InProgress,
    /// The key was used for a request with another fingerprint.
    DifferentRequest,
    /// Failed, or its lease expired: try claiming again.
    Reclaimable,
    /// No row: nobody has used the key (or it was purged).
    Unused,
}

/// The outcome of [`claim`]: whether this request executes, under which lease.
#[derive(Debug)]
#[non_exhaustive]
pub enum Claimed {
    /// A new key: this request executes, under the lease token it holds.
    Fresh(Uuid),
    /// A failed key retried, or an expired lease taken over.
    Reclaimed {
        /// The new lease token this request executes under.
        lease: Uuid,
        /// `true` if the key was `processing` under an expired lease (a takeover), `false`
        /// if it had failed.
        took_over: bool,
    },
    /// Someone holds the key already: what the table says about it.
    Existing(Existing),
    /// The scope has claimed as many keys in the last hour as it may.
    OverQuota,
}

/// The claim of a key nobody holds yet: one autocommit INSERT that the unique constraint
/// decides. `true` means the key is ours, under `token`; `false` that a row exists already
/// (whatever its state), or that the scope claimed `keys_per_hour` keys in the last hour
/// already (0: no quota), counted up to the quota in the same statement.
pub async fn claim_new<'e>(
    db: impl PgExecutor<'e>,
    req: &IdempotentRequest,
    token: Uuid,
    lease: Duration,
    keys_per_hour: u32,
) -> Result<bool, sqlx::Error> {
    let lease_ms = lease.as_millis() as i64;
    // Without a quota, the plain INSERT: the quota's count is paid only when there is one.
    let inserted = if keys_per_hour == 0 {
        sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, method, route, fingerprint, state, lease_token, locked_until)
             VALUES ($1, $2, $7, $3, $4, 'processing', $5, now() + $6::bigint * interval '1 millisecond')
             ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key_key DO NOTHING",
        )
        .bind(&req.scope)
        .bind(req.key.as_str())
        .bind(&req.operation)
        .bind(req.fingerprint.as_str())
        .bind(token)
        .bind(lease_ms)
        .bind(req.method.as_str())
        .execute(db)
        .await?
    } else {
        sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, method, route, fingerprint, state, lease_token, locked_until)
             SELECT $1, $2, $8, $3, $4, 'processing', $5, now() + $6::bigint * interval '1 millisecond'
              WHERE (SELECT count(*) FROM (
                      SELECT 1 FROM idempotency_keys
                       WHERE scope = $1 AND created_at > now() - interval '1 hour' LIMIT $7
                    ) AS recent) < $7
             ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key_key DO NOTHING",
        )
        .bind(&req.scope)
        .bind(req.key.as_str())
        .bind(&req.operation)
        .bind(req.fingerprint.as_str())
        .bind(token)
        .bind(lease_ms)
        .bind(i64::from(keys_per_hour))
        .bind(req.method.as_str())
        .execute(db)
        .await?
    };
    Ok(inserted.rows_affected() == 1)
}

/// One attempt to become the executor of `req`.
pub async fn claim(
    db: &PgPool,
    req: &IdempotentRequest,
    lease: Duration,
    keys_per_hour: u32,
) -> Result<Claimed, sqlx::Error> {
    let token = Uuid::new_v4();
    if claim_new(db, req, token, lease, keys_per_hour).await? {
        return Ok(Claimed::Fresh(token));
    }
    let lease_ms = lease.as_millis() as i64;

    // Retry after a failure, or take over a lease whose holder went silent. The fingerprint
    // condition makes sure a different request can never take a key over.
    let reclaimed: Option<String> = sqlx::query_scalar(
        "UPDATE idempotency_keys k
              SET state = 'processing', lease_token = $4, finished_at = NULL,
                  locked_until = now() + $5::bigint * interval '1 millisecond'
             FROM (SELECT state FROM idempotency_keys WHERE scope = $1 AND key = $2 FOR UPDATE) previous
            WHERE k.scope = $1 AND k.key = $2 AND k.fingerprint = ANY($3)
              AND (k.state = 'failed' OR (k.state = 'processing' AND k.locked_until < now()))
        RETURNING previous.state AS previous",
    )
    .bind(&req.scope)
    .bind(req.key.as_str())
    .bind(req.fingerprint.accepted())
    .bind(token)
    .bind(lease_ms)
    .fetch_optional(db)
    .await?;
    if let Some(previous) = reclaimed {
        return Ok(Claimed::Reclaimed {
            lease: token,
            took_over: previous == "processing",
        });
    }
    match existing(db, req).await? {
        // No row, and our insert inserted none: the quota refused it.
        Existing::Unused if keys_per_hour > 0 => Ok(Claimed::OverQuota),
        other => Ok(Claimed::Existing(other)),
    }
}

/// A key's row as a read returns it. Public so that an application may read it in a
/// statement of its own (the shop reads its session in the same statement) and have it
/// judged by [`judge`].
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct KeyRow {
    /// The operation the key was claimed for (`route`).
    pub route: String,
    /// The fingerprint of the request that claimed it.
    pub fingerprint: String,
    /// `processing`, `completed` or `failed`.
    pub state: String,
    /// `locked_until > now()`, evaluated by the database (`false` when there is no lease).
    pub lease_valid: bool,
    /// The stored answer's status, once completed.
    pub response_status: Option<i16>,
    /// The stored answer's headers (a JSON object of name to value), once completed.
    pub response_headers: Option<serde_json::Value>,
    /// The stored answer's body, once completed.
    pub response_body: Option<Vec<u8>>,
}

impl KeyRow {
    /// What the row holds, whatever request it was for.
    fn held(self) -> Held {
        match (
            self.state.as_str(),
            self.response_status,
            self.response_body,
        ) {
            ("completed", Some(status), Some(body)) => {
                let headers = self.response_headers.unwrap_or_default();
                Held::Completed(StoredResponse::from_parts(status, &headers, body))
            }
            ("processing", _, _) if self.lease_valid => Held::Running,
            _ => Held::Open,
        }
    }
}

pub(crate) async fn key_row(
    db: &PgPool,
    scope: &str,
    key: &str,
) -> Result<Option<KeyRow>, sqlx::Error> {
    sqlx::query_as::<_, KeyRow>(
        "SELECT route, fingerprint, state, coalesce(locked_until > now(), false) AS lease_valid,
                  response_status, response_headers, response_body
             FROM idempotency_keys WHERE scope = $1 AND key = $2",
    )
    .bind(scope)
    .bind(key)
    .fetch_optional(db)
    .await
}

/// What the table holds for `req`'s key, judged against `req`.
pub async fn existing(db: &PgPool, req: &IdempotentRequest) -> Result<Existing, sqlx::Error> {
    let row = key_row(db, &req.scope, req.key.as_str()).await?;
    Ok(judge(row, req))
}

/// What a key's row (or its absence) means for `req`.
pub fn judge(row: Option<KeyRow>, req: &IdempotentRequest) -> Existing {
    let Some(row) = row else {
        return Existing::Unused;
    };
    if !req.fingerprint.matches(&row.fingerprint) {
        return Existing::DifferentRequest;
    }
    match row.held() {
        Held::Completed(stored) => Existing::Completed(stored),
        Held::Running => Existing::InProgress,
        Held::OtherOperation | Held::Open => Existing::Reclaimable,
    }
}

/// What a key holds for an operation, whatever body its request had.
#[derive(Debug)]
#[non_exhaustive]
pub enum Held {
    /// The operation completed under the key: its stored answer.
    Completed(StoredResponse),
    /// The key was used for another operation.
    OtherOperation,
    /// Its request is running (the lease is valid).
    Running,
    /// Unknown, purged, failed or abandoned: nothing to answer with.
    Open,
}

/// For a caller that names a key without its request body (the cart's checkout): the
/// stored answer of `operation` under that key, if it has one.
pub async fn held(
    db: &PgPool,
    scope: &str,
    key: &IdempotencyKey,
    operation: &str,
) -> Result<Held, sqlx::Error> {
    Ok(match key_row(db, scope, key.as_str()).await? {
        Some(row) if row.route != operation => Held::OtherOperation,
        Some(row) => row.held(),
        None => Held::Open,
    })
}

/// The end of a statement whose CTE `done` returns the key it finished (scope, key,
/// awaited): notifies the waiters' channel only when a repeat waits for the key, so a key
/// nobody waits for never takes the notification queue's lock at commit. The payload is
/// the key's name (at most 255 characters), never its scope (see [`crate::wake::CHANNEL`]).
macro_rules! announce {
    () => {
        "SELECT CASE WHEN awaited THEN pg_notify('once_keys', done.key) IS NULL END IS NULL
           FROM done"
    };
}

/// Stores the outcome, fenced on our lease: `false` means another request took the key
/// over, and the caller must roll back everything it wrote. A key that a repeat waits for
/// (see [`crate::wake`]) is announced on [`crate::wake::CHANNEL`] when the transaction
/// commits.
pub async fn complete<'e>(
    tx: impl PgExecutor<'e>,
    req: &IdempotentRequest,
    lease: Uuid,
    response: &StoredResponse,
) -> Result<bool, sqlx::Error> {
    let updated: Option<bool> = sqlx::query_scalar(concat!(
        "WITH done AS (
            UPDATE idempotency_keys
               SET state = 'completed', response_status = $4, response_headers = $5, response_body = $6,
                   completed_at = now(), finished_at = now(), locked_until = NULL
             WHERE scope = $1 AND key = $2 AND lease_token = $3 AND state = 'processing'
         RETURNING scope, key, awaited) ",
        announce!()
    ))
    .bind(&req.scope)
    .bind(req.key.as_str())
    .bind(lease)
    .bind(response.status as i16)
    .bind(response.headers_json())
    .bind(&response.body)
    .fetch_optional(tx)
    .await?;
    Ok(updated.is_some())
}

/// Extends our lease (the heartbeat); `false` means the lease is no longer ours.
pub async fn renew(
    db: &PgPool,
    req: &IdempotentRequest,
    lease: Uuid,
    length: Duration,
) -> Result<bool, sqlx::Error> {
    let renewed = sqlx::query(
        "UPDATE idempotency_keys SET locked_until = now() + $4::bigint * interval '1 millisecond'
          WHERE scope = $1 AND key = $2 AND lease_token = $3 AND state = 'processing'",
    )
    .bind(&req.scope)
    .bind(req.key.as_str())
    .bind(lease)
    .bind(length.as_millis() as i64)
    .execute(db)
    .await?;
    Ok(renewed.rows_affected() == 1)
}

/// Marks a transient failure so that the same key may run again at once. Fenced like
/// completion: a stale holder that fails after a takeover must not reopen the key while
/// the new holder is still working. Announced to waiting repeats like a completion: one of
/// them runs the request again.
pub async fn fail(db: &PgPool, req: &IdempotentRequest, lease: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query_scalar::<_, bool>(concat!(
        "WITH done AS (
            UPDATE idempotency_keys SET state = 'failed', locked_until = NULL, finished_at = now()
             WHERE scope = $1 AND key = $2 AND lease_token = $3 AND state = 'processing'
         RETURNING scope, key, awaited) ",
        announce!()
    ))
    .bind(&req.scope)
    .bind(req.key.as_str())
    .bind(lease)
    .fetch_optional(db)
    .await?;
    Ok(())
}
