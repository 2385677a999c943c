//! The one statement a keyed request starts with, without a lock: whether its session
//! exists (the session store's table, `tower_sessions.session`, read as its own load does)
//! and what the key table holds for its key. A repeat of a known key needs nothing else.
//! It runs on a connection of its own (`db::Readers`), which costs no ping as it goes back.
//! (The benchmark's floor, `examples/bare.rs`, and `scripts/bench.d` run the same statement.)

use std::sync::LazyLock;

use once_axum::KeyRead;
use once_core::IdempotentRequest;

use crate::db::Readers;

/// What a request learns from its first statement.
pub struct FirstRead {
    /// The session store knows the request's scope (the session its cookie names).
    pub session_known: bool,
    /// The key's state, and how long the session lasts. Its expiry only moves later, and
    /// the only deletion, `session::forget_unused`, spares a session that holds a key, as
    /// one with a completed answer does; so an answer kept in memory until then is never
    /// given to a session the store no longer knows (docs/protocol.md, "Repeats from
    /// memory").
    pub key: KeyRead,
}

/// The key table's first read, asking in the same statement until when the session lives.
static READ: LazyLock<once_pg::FirstRead> = LazyLock::new(|| {
    once_pg::FirstRead::with_scope_expiry(
        "SELECT s.expiry_date FROM tower_sessions.session s WHERE s.id = $1",
    )
});

pub async fn read(readers: &Readers, req: &IdempotentRequest) -> Result<FirstRead, sqlx::Error> {
    let mut reader = readers.acquire().await?;
    let within = reader.answer_within();
    let read = READ.run(reader.conn(), req);
    let row = tokio::time::timeout(within, read)
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)??;
    reader.done();
    Ok(FirstRead {
        session_known: row.scope_known,
        key: KeyRead::from_row(row),
    })
}
