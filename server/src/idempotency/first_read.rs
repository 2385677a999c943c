//! The one statement a keyed request starts with, without a lock: whether its session
//! exists (the session store's table, `tower_sessions.session`, read as its own load does)
//! and what the key table holds for its key. A repeat of a known key needs nothing else.
//! It runs on a connection of its own (`db::Readers`), which costs no ping as it goes back.
//! (The benchmark's floor, `examples/bare.rs`, and `scripts/bench.d` run the same statement.)

use once_core::IdempotentRequest;
use once_pg::{
    store::{judge, KeyRow},
    Existing,
};

use crate::db::Readers;

/// What a request learns from its first statement.
pub struct FirstRead {
    /// The session store knows the request's scope (the session its cookie names).
    pub session_known: bool,
    pub existing: Existing,
}

struct FirstReadRow {
    session_known: bool,
    route: Option<String>,
    fingerprint: Option<String>,
    state: Option<String>,
    lease_valid: bool,
    response_status: Option<i16>,
    response_headers: Option<serde_json::Value>,
    response_body: Option<Vec<u8>>,
}

pub async fn read(readers: &Readers, req: &IdempotentRequest) -> Result<FirstRead, sqlx::Error> {
    let mut reader = readers.acquire().await?;
    let within = reader.answer_within();
    let read = sqlx::query_as!(
        FirstReadRow,
        r#"SELECT EXISTS (SELECT 1 FROM tower_sessions.session s
                           WHERE s.id = $1 AND s.expiry_date > now()) AS "session_known!",
                  k.route AS "route?", k.fingerprint AS "fingerprint?", k.state AS "state?",
                  coalesce(k.locked_until > now(), false) AS "lease_valid!",
                  k.response_status AS "response_status?", k.response_headers AS "response_headers?",
                  k.response_body AS "response_body?"
             FROM (VALUES (1)) AS one (n)
             LEFT JOIN idempotency_keys k ON k.scope = $1 AND k.key = $2"#,
        &req.scope,
        req.key.as_str()
    )
    .fetch_one(reader.conn());
    let row = tokio::time::timeout(within, read)
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)??;
    reader.done();
    let key = match (row.route, row.fingerprint, row.state) {
        (Some(route), Some(fingerprint), Some(state)) => Some(KeyRow {
            route,
            fingerprint,
            state,
            lease_valid: row.lease_valid,
            response_status: row.response_status,
            response_headers: row.response_headers,
            response_body: row.response_body,
        }),
        _ => None,
    };
    Ok(FirstRead {
        session_known: row.session_known,
        existing: judge(key, req),
    })
}
