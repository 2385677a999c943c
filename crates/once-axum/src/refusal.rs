//! [`Refusal`]: the protocol's own refusals and failures, with the parts an answer is made
//! of (status, problem name, words for a client, the wait), so that [`crate::Problem`] and an
//! application's own error type render them alike.

use axum::http::StatusCode;
use once_core::KeyError;

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
    /// The server is stopping while the request waited for its key's request: 503 with
    /// `Retry-After` (another instance, or this one restarted, answers the repeat).
    Stopping,
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
            Self::Store(_) | Self::Stopping => StatusCode::SERVICE_UNAVAILABLE,
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
            Self::Stopping => "server-stopping",
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
            Self::Stopping => "the server is stopping; repeat the request".into(),
        }
    }

    /// Whether the same request may still get another answer: the key is left open (running,
    /// over a quota, or the work could not run). A malformed, reused or unknown key is
    /// answered the same way however often it is sent.
    pub fn leaves_key_open(&self) -> bool {
        matches!(
            self,
            Self::InProgress
                | Self::KeyQuota { .. }
                | Self::Store(_)
                | Self::Panicked(_)
                | Self::Stopping
        )
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
            Self::Store(e) => {
                tracing::warn!(error = ?e, "idempotent request: database unavailable")
            }
            Self::Panicked(what) => tracing::error!(%what, "idempotent request panicked"),
            _ => {}
        }
    }
}
