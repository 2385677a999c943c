//! What an application plugs into the executor: its error type, and a [`Hooks`] value for
//! its first read, its metrics and its test-time faults. Hooks are a plain value: an
//! application may make one per request (the shop binds a request's test faults this way),
//! and nothing test-only rides in the protocol's own types.

use std::future::Future;

use axum::{http::StatusCode, response::IntoResponse};
use once_core::{IdempotentRequest, KeyError, KeyedOperation, StoredResponse};
use once_pg::{store, Existing};
use sqlx::{PgConnection, PgPool};

/// The protocol's own refusals and failures. Each knows its status, its problem name, its
/// words for a client (never an internal error's text) and whether it says when to come
/// back; [`crate::Problem`] renders them, and an application's own error type may reuse
/// the same parts.
#[derive(Debug)]
#[non_exhaustive]
pub enum Refusal {
    /// No `Idempotency-Key` header: 400.
    KeyMissing,
    /// A header that is not a key: 400.
    KeyMalformed(KeyError),
    /// The key was used with another request: 422, stored by nobody.
    KeyReused,
    /// The scope never used the key, or it was purged (the status route): 404.
    KeyUnknown,
    /// The key's request is running: 409 with `Retry-After`.
    InProgress,
    /// The scope claimed as many new keys in the last hour as the quota allows: 429.
    KeyQuota {
        /// Seconds until the scope may claim a new key again.
        retry_after_secs: u64,
    },
    /// The key table (or the work's database) could not be read or written: 503.
    Store(sqlx::Error),
    /// The work panicked: 500.
    Panicked(String),
}

impl Refusal {
    /// The status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::KeyMissing | Self::KeyMalformed(_) => StatusCode::BAD_REQUEST,
            Self::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::KeyUnknown => StatusCode::NOT_FOUND,
            Self::InProgress => StatusCode::CONFLICT,
            Self::KeyQuota { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Panicked(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Its problem name (see [`crate::problem`]).
    pub fn problem_type(&self) -> &'static str {
        match self {
            Self::KeyMissing => "idempotency-key-missing",
            Self::KeyMalformed(_) => "idempotency-key-malformed",
            Self::KeyReused => "idempotency-key-reused",
            Self::KeyUnknown => "idempotency-key-unknown",
            Self::InProgress => "request-in-progress",
            Self::KeyQuota { .. } => "key-quota",
            Self::Store(_) => "service-unavailable",
            Self::Panicked(_) => "internal-error",
        }
    }

    /// What a client reads: what happened and what to do, with nothing of the server's
    /// insides (a database error's text is for the log, [`Refusal::log`]).
    pub fn detail(&self) -> String {
        match self {
            Self::KeyMissing => "this request needs an Idempotency-Key header".into(),
            Self::KeyMalformed(e) => e.to_string(),
            Self::KeyReused => "this Idempotency-Key was used for a different request".into(),
            Self::KeyUnknown => "no request was made with this Idempotency-Key".into(),
            Self::InProgress => {
                "a request with this Idempotency-Key is still being processed; repeat it later"
                    .into()
            }
            Self::KeyQuota { .. } => {
                "as many new Idempotency-Keys were used in the last hour as are allowed".into()
            }
            Self::Store(_) => "the service is temporarily unavailable; repeat the request".into(),
            Self::Panicked(_) => "internal error; repeat the request".into(),
        }
    }

    /// Seconds to tell the client to wait, for a refusal that names its own wait.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::KeyQuota { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// Logs what the client is not told: the database error, the panic.
    pub fn log(&self) {
        match self {
            Self::Store(e) => tracing::warn!(error = %e, "idempotent request: database unavailable"),
            Self::Panicked(what) => tracing::error!(%what, "idempotent request panicked"),
            _ => {}
        }
    }
}

/// A refusal as [`crate::Problem`] renders it.
impl IntoResponse for Refusal {
    fn into_response(self) -> axum::response::Response {
        crate::Problem::from(self).into_response()
    }
}

/// The application's error type: what work fails with and what refusals become. Its
/// response is what is stored and sent; [`ProtocolError::is_stored`] decides which.
/// [`crate::Problem`] is a ready one.
pub trait ProtocolError: IntoResponse + From<Refusal> + Send + 'static {
    /// The status it is answered with.
    fn status(&self) -> StatusCode;

    /// Whether the key stores this answer (definitive) or is left open for a retry
    /// (transient). By default the protocol's rule for its status,
    /// [`once_core::is_stored`]: any 4xx other than 408 and 429 is stored, 409 included. An
    /// answer that means "not now" (another request is busy with the resource) overrides it.
    fn is_stored(&self) -> bool {
        once_core::is_stored(self.status())
    }
}

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
}
