//! What an application plugs into the executor: its error type, and a [`Hooks`] value for
//! its first read, its metrics and its test-time faults. Hooks are a plain value: an
//! application may make one per request (the shop binds a request's test faults this way),
//! and nothing test-only rides in the protocol's own types.

use std::{future::Future, time::Duration};

use once_core::{IdempotentRequest, KeyedOperation, StoredResponse};
use once_pg::{store, Existing, FirstRead, FirstReadRow};
use sqlx::{PgConnection, PgPool};

use crate::{problem::ProtocolError, refusal::Refusal};

/// What the executor counts, for an application's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Counted {
    /// A request that executed (first time, retry after failure, or takeover).
    Execution,
    /// A repeat answered with the stored answer.
    Replay,
    /// A repeat answered 409: the first request still runs.
    InProgress,
    /// A repeat answered 422: the key was used with another request.
    KeyReused,
    /// A lease that ran out, taken over.
    Takeover,
    /// A failed key run again.
    RetryAfterFailure,
    /// A completion refused because the lease had been taken over.
    Fenced,
    /// A repeat that waited (`Prefer: wait`) for its key's running request.
    Waited,
    /// A repeat answered from the answer cache ([`crate::AnswerCache`]), with no database
    /// statement; it is counted as a [`Counted::Replay`] or [`Counted::KeyReused`] too.
    Remembered,
}

/// What the first read of a keyed request learnt: what the table holds for its key, and
/// what an answer cache needs to keep a completed answer ([`crate::AnswerCache`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct KeyRead {
    /// What the table holds for the key, judged against the request.
    pub existing: Existing,
    /// How long ago the key's request finished, by the database's clock. `None`: not
    /// known, and a completed answer this read found is not kept in memory.
    pub finished_ago: Option<Duration>,
    /// How much longer the request's scope stays known. `None`: the scope never ends;
    /// `Some(ZERO)`: no answer of the scope is kept in memory.
    pub scope_lasts: Option<Duration>,
}

impl KeyRead {
    /// A read that tells the cache nothing: what it finds is never kept in memory.
    pub fn new(existing: Existing) -> Self {
        Self {
            existing,
            finished_ago: None,
            scope_lasts: Some(Duration::ZERO),
        }
    }

    /// What `once_pg`'s first read found (the application has judged its scope already).
    pub fn from_row(row: FirstReadRow) -> Self {
        Self {
            existing: row.existing,
            finished_ago: row.finished_ago,
            scope_lasts: row.scope_lasts,
        }
    }
}

/// A repeat of a request the key table knows, answered from the table without running
/// anything.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Repeat<'a> {
    /// The stored answer, sent again.
    Replay(&'a StoredResponse),
    /// The first request still runs: 409.
    InProgress,
    /// The key was used with another request: 422.
    KeyReused,
}

/// An application's hooks into the executor; every method has a default.
pub trait Hooks: Clone + Send + Sync + 'static {
    /// What refusals become and work fails with.
    type Error: ProtocolError;

    /// The read every keyed request starts with: what the table holds for its key. An
    /// application may read its scope in the same statement (does the session exist?) and
    /// refuse there; the table's row is judged by [`once_pg::store::judge`].
    fn first_read(
        &self,
        db: &PgPool,
        req: &IdempotentRequest,
    ) -> impl Future<Output = Result<Existing, Self::Error>> + Send {
        async move {
            store::existing(db, req)
                .await
                .map_err(|e| Refusal::Store(e).into())
        }
    }

    /// The read every keyed request starts with, as the executor calls it: by default
    /// [`Hooks::first_read`], which says nothing an answer cache could use. An application
    /// with a cache implements this one instead, with `once_pg::FirstRead` (see
    /// [`KeyRead::from_row`]), saying how long its scope stays known.
    fn read_key(
        &self,
        db: &PgPool,
        req: &IdempotentRequest,
    ) -> impl Future<Output = Result<KeyRead, Self::Error>> + Send {
        async move { self.first_read(db, req).await.map(KeyRead::new) }
    }

    /// Called for each thing the executor counts.
    fn count(&self, _what: Counted) {}

    /// Runs in the work's transaction just before the outcome is stored with the key: what
    /// an application writes here (a record of the request) commits with the work and the
    /// stored answer, or not at all. An error rolls everything back, and the request is
    /// answered as a transient failure.
    fn on_complete(
        &self,
        _tx: &mut PgConnection,
        _req: &IdempotentRequest,
        _stored: &StoredResponse,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        async { Ok(()) }
    }

    /// Told of each repeat answered from the table, before the answer is sent. No
    /// transaction of the protocol's is open: a repeat writes nothing of the protocol's
    /// (the read-first rule), so what an application records here is its own
    /// statement, and its failure must not change the answer.
    fn on_repeat(
        &self,
        _at: KeyedOperation<'_>,
        _repeat: Repeat<'_>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Runs between the work and its commit, with the work's transaction open and no lease
    /// renewal: where tests hold a request (its lease then runs out, as a stalled process's
    /// does) or fail it. An error rolls the work back and answers with the error.
    fn before_commit(
        &self,
        _req: &IdempotentRequest,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }
}

/// Hooks that change nothing: answers as [`crate::Problem`], or as the application's own
/// error type `E`.
pub struct NoHooks<E = crate::Problem>(std::marker::PhantomData<fn() -> E>);

impl<E> Default for NoHooks<E> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<E> Clone for NoHooks<E> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<E: ProtocolError> Hooks for NoHooks<E> {
    type Error = E;

    async fn read_key(&self, db: &PgPool, req: &IdempotentRequest) -> Result<KeyRead, E> {
        static PLAIN: std::sync::LazyLock<FirstRead> = std::sync::LazyLock::new(FirstRead::plain);
        let row = PLAIN.run(db, req).await.map_err(Refusal::Store)?;
        Ok(KeyRead::from_row(row))
    }
}
