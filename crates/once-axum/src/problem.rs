//! [`Problem`]: a stock RFC 9457 `application/problem+json` error, enough for an application
//! to start with no error type of its own. It renders the protocol's refusals ([`Refusal`])
//! and the work's own answers alike, sets `Retry-After` on every answer that leaves the key
//! open, and never shows a client what went wrong inside (a database error is logged, and
//! the client reads "temporarily unavailable").
//!
//! An application that has an error type keeps it: implement [`ProtocolError`] and
//! `From<Refusal>` for it (the refusal's [`Refusal::status`], [`Refusal::problem_type`] and
//! [`Refusal::detail`] are there to be reused).
//!
//! The `type` of a problem is this page's address with the problem's name as its fragment.
//! The protocol's names:
//!
//! ### idempotency-key-missing
//! 400: the route requires an `Idempotency-Key` header.
//! ### idempotency-key-malformed
//! 400: the header is not a key (empty, too long, not visible ASCII, badly quoted, or sent
//! twice).
//! ### idempotency-key-reused
//! 422: the key was used with another request (another body, or another resource).
//! ### idempotency-key-unknown
//! 404: the scope never used the key, or it was purged (the key-status route).
//! ### request-in-progress
//! 409: the key's first request is still running (still, at the end of the wait a
//! `Prefer: wait` asked for); `Retry-After` says when to ask again.
//! ### key-quota
//! 429: the scope claimed as many new keys in the last hour as it may.
//! ### scope-missing
//! 400: the header that names the caller's scope ([`crate::HeaderScope`]) is missing or empty.
//! ### scope-invalid
//! 400: that header was sent twice, or is too long, or not all visible ASCII.
//! ### body-invalid
//! 400, 413, 415 or 422: the body is not JSON, too large, not of the expected shape, or not
//! sent as JSON.
//! ### path-invalid
//! 400: the path names no resource this route knows how to read (an id that is no id).
//! ### data-refused
//! 422: the database refused the request's data (a value out of range, a broken
//! constraint): the request's own fault, stored with the key.
//! ### service-unavailable
//! 503: the key table (or the work's database) could not be reached; retry the same key.
//! ### internal-error
//! 500: the work panicked; retry the same key.
//! ### server-stopping
//! 503: the server stopped while the request waited (`Prefer: wait`) for its key's running
//! request; retry the same key.

use std::borrow::Cow;

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::refusal::Refusal;

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

/// A refusal as [`crate::Problem`] renders it.
impl IntoResponse for Refusal {
    fn into_response(self) -> axum::response::Response {
        Problem::from(self).into_response()
    }
}

/// Where the protocol's problem names are described (this module's page).
pub const PROBLEM_TYPE_BASE: &str =
    "https://docs.rs/once-axum/latest/once_axum/problem/index.html#";

/// Seconds a client is told to wait before repeating an answer that left its key open,
/// when the answer does not say otherwise.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;

/// An error answered as `application/problem+json`.
///
/// ```
/// use axum::http::StatusCode;
/// use once_axum::Problem;
///
/// // A definitive refusal the work decided: stored with the key and replayed.
/// let taken = Problem::new(StatusCode::CONFLICT, "room-taken", "That room is booked that night.");
/// assert!(once_axum::ProtocolError::is_stored(&taken));
/// // The same status, left open for a retry.
/// let busy = taken.clone().transient();
/// assert!(!once_axum::ProtocolError::is_stored(&busy));
/// ```
#[derive(Clone, Debug)]
pub struct Problem {
    status: StatusCode,
    name: Cow<'static, str>,
    type_base: Cow<'static, str>,
    detail: String,
    stored: bool,
    retry_after_secs: Option<u64>,
}

/// The body of a [`Problem`].
#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    problem_type: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    /// Whether the same request with the same key may still get another answer.
    retryable: bool,
}

impl Problem {
    /// A problem of the application's own, named `name`, with `detail` in words safe to show
    /// a client. Whether the key stores it follows the protocol's rule for `status`
    /// ([`once_core::is_stored`]).
    pub fn new(
        status: StatusCode,
        name: impl Into<Cow<'static, str>>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            name: name.into(),
            type_base: Cow::Borrowed(PROBLEM_TYPE_BASE),
            detail: detail.into(),
            stored: once_core::is_stored(status),
            retry_after_secs: None,
        }
    }

    /// The same problem, with its `type` under the application's own address
    /// (`https://example.com/problems/` gives `https://example.com/problems/{name}`).
    pub fn with_type_base(mut self, base: impl Into<Cow<'static, str>>) -> Self {
        self.type_base = base.into();
        self
    }

    /// The same problem, but leaving the key open for a retry whatever its status ("not
    /// now" rather than "no": another request of the client's is busy with the resource).
    pub fn transient(mut self) -> Self {
        self.stored = false;
        self
    }

    /// The same problem, telling the client to wait `secs` seconds before repeating it.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// The problem's name (the fragment of its `type`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What a client reads.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl ProtocolError for Problem {
    fn status(&self) -> StatusCode {
        self.status
    }

    fn is_stored(&self) -> bool {
        self.stored
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        refusal.log();
        let mut problem = Self::new(refusal.status(), refusal.problem_type(), refusal.detail());
        problem.stored = !refusal.leaves_key_open();
        problem.retry_after_secs = refusal.retry_after_secs();
        problem
    }
}

/// A database error met by the work. Data the database refuses for good is the request's own
/// fault: 422 `data-refused`, definitive, stored with the key. That is class 22 (a value out
/// of range, a text that is no date) and the constraints whose verdict no other transaction
/// can change: not-null (23502), unique (23505: PostgreSQL waits for a conflicting row's
/// transaction to end before it says so), check (23514) and exclusion (23P01). A foreign key
/// (23503) is left open: its parent may be a row another request has not committed yet.
/// Anything else ("the database is away", a standby refusing writes, a lost connection, a
/// deadlock) is 503 `service-unavailable`, the key left open. The error's text is logged,
/// never sent.
///
/// Work that commits recovery points of its own before its last transaction must not meet
/// its own earlier rows as a unique violation on a retry (write them with
/// `ON CONFLICT DO NOTHING`): the retry would be stored as a refusal.
impl From<sqlx::Error> for Problem {
    fn from(e: sqlx::Error) -> Self {
        let code = e.as_database_error().and_then(|d| d.code());
        let refused_for_good = |code: &str| {
            code.starts_with("22") || ["23502", "23505", "23514", "23P01"].contains(&code)
        };
        match code {
            Some(code) if refused_for_good(&code) => {
                tracing::info!(error = ?e, "the database refused the request's data");
                Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "data-refused",
                    "the request's data was refused",
                )
            }
            _ => Refusal::Store(e).into(),
        }
    }
}

/// A body axum's `Json` refused (not JSON, another shape, another content type): its status
/// (400, 413, 415 or 422), `body-invalid`, nothing stored. A handler takes
/// [`crate::JsonBody`], or `Result<Json<T>, JsonRejection>` and answers `body?`.
impl From<axum::extract::rejection::JsonRejection> for Problem {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        let status = rejection.status();
        Self::new(status, "body-invalid", rejection.body_text())
    }
}

/// A path axum's `Path` refused (an id that is no id): 400 `path-invalid`.
impl From<axum::extract::rejection::PathRejection> for Problem {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "path-invalid",
            rejection.body_text(),
        )
    }
}

/// A reply that cannot be serialised: a fault of the server's, 500, the key left open.
impl From<serde_json::Error> for Problem {
    fn from(e: serde_json::Error) -> Self {
        Refusal::Panicked(format!("a reply that does not serialise: {e}")).into()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = Body {
            problem_type: format!("{}{}", self.type_base, self.name),
            title: self.status.canonical_reason().unwrap_or("Error"),
            status: self.status.as_u16(),
            detail: &self.detail,
            retryable: !self.stored,
        };
        let mut response = (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
            .into_response();
        let retry_after = match self.stored {
            true => self.retry_after_secs,
            false => Some(self.retry_after_secs.unwrap_or(DEFAULT_RETRY_AFTER_SECS)),
        };
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sent(problem: Problem) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = problem.into_response();
        let status = response.status();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap();
        (status, retry, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn a_refusal_that_leaves_the_key_open_says_when_to_come_back() {
        let (status, retry, body) = sent(Refusal::InProgress.into()).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(retry.as_deref(), Some("1"));
        assert_eq!(body["retryable"], true);
        assert_eq!(
            body["type"],
            format!("{PROBLEM_TYPE_BASE}request-in-progress")
        );
        let (_, retry, _) = sent(
            Refusal::KeyQuota {
                retry_after_secs: 300,
            }
            .into(),
        )
        .await;
        assert_eq!(retry.as_deref(), Some("300"));
    }

    #[tokio::test]
    async fn a_refusal_that_no_repeat_can_change_invites_no_retry() {
        for settled in [Refusal::KeyMissing, Refusal::KeyReused, Refusal::KeyUnknown] {
            let (_, retry, body) = sent(settled.into()).await;
            assert_eq!(
                (retry, &body["retryable"]),
                (None, &serde_json::json!(false)),
                "{body}"
            );
        }
    }

    #[tokio::test]
    async fn a_definitive_answer_has_no_retry_after_and_a_transient_one_has() {
        let taken = Problem::new(StatusCode::CONFLICT, "room-taken", "Taken.");
        let (_, retry, body) = sent(taken.clone()).await;
        assert_eq!(
            (retry, &body["retryable"]),
            (None, &serde_json::json!(false))
        );
        let (_, retry, body) = sent(taken.transient()).await;
        assert_eq!(
            (retry.as_deref(), &body["retryable"]),
            (Some("1"), &serde_json::json!(true))
        );
    }

    #[tokio::test]
    async fn a_foreign_key_may_wait_for_its_parent_and_a_unique_value_may_not() {
        use sqlx::error::{DatabaseError, ErrorKind};
        #[derive(Debug)]
        struct Refused(&'static str);
        impl std::fmt::Display for Refused {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "refused {}", self.0)
            }
        }
        impl std::error::Error for Refused {}
        impl DatabaseError for Refused {
            fn message(&self) -> &str {
                "refused"
            }
            fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
                Some(self.0.into())
            }
            fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
                self
            }
            fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
                self
            }
            fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
                self
            }
            fn kind(&self) -> ErrorKind {
                ErrorKind::Other
            }
        }
        let status = |code| Problem::from(sqlx::Error::Database(Box::new(Refused(code)))).status;
        for stored in ["22007", "23502", "23505", "23514", "23P01"] {
            assert_eq!(status(stored), StatusCode::UNPROCESSABLE_ENTITY, "{stored}");
        }
        for open in [
            "23503", "40001", "40P01", "55P03", "57014", "25006", "08006",
        ] {
            assert_eq!(status(open), StatusCode::SERVICE_UNAVAILABLE, "{open}");
        }
    }

    #[tokio::test]
    async fn a_database_error_is_not_shown_to_the_client() {
        let e = sqlx::Error::Protocol("relation \"secret_table\" does not exist".into());
        let (status, retry, body) = sent(e.into()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry.as_deref(), Some("1"));
        assert!(!body.to_string().contains("secret_table"), "{body}");
    }
}
