//! One error type for the HTTP boundary. Every failure becomes an RFC 9457
//! `application/problem+json` answer; internal details are logged, never sent.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use domain::details::FieldProblem;
use once_axum::{ProtocolError, Refusal, Reply};
use serde::Serialize;

/// Seconds a client should wait before retrying after a 409 or 503.
pub const RETRY_AFTER_SECS: u64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("this request needs a session: open one with GET /api/session (or load any page) and send its cookie")]
    SessionRequired,
    #[error("this route requires an Idempotency-Key header")]
    IdempotencyKeyMissing,
    #[error("{0}")]
    IdempotencyKeyMalformed(#[from] once_core::KeyError),
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyKeyReused,
    /// The shopper's details need fixing: each field, and what is wrong with it.
    #[error("Some of your details need fixing: {}", fields_in_words(.0))]
    InvalidDetails(Vec<FieldProblem>),
    #[error("a request with this Idempotency-Key is still being processed")]
    RequestInProgress,
    #[error("Your cart changed since this page was shown (perhaps in another tab). Please check it and place the order again.")]
    CartChanged,
    #[error("A payment for this order is already in progress, perhaps in another tab. Wait a moment: the order shows the result when it is done.")]
    PaymentInProgress,
    #[error("not found")]
    NotFound,
    #[error("this request was sent by a page of another site, so it was not acted on")]
    CrossSite,
    #[error("{detail}")]
    BadRequest {
        problem: &'static str,
        detail: String,
    },
    #[error("{detail}")]
    Unprocessable {
        problem: &'static str,
        detail: String,
    },
    #[error("{detail}")]
    Unauthorized {
        problem: &'static str,
        detail: String,
    },
    /// A refusal written by a framework (axum's extractors, Leptos), with its status.
    #[error("{detail}")]
    Refused {
        status: StatusCode,
        problem: &'static str,
        detail: String,
    },
    /// Over a rate limit or a quota: the same request may succeed after `retry_after_secs`.
    #[error("{detail}")]
    TooManyRequests {
        problem: &'static str,
        detail: String,
        retry_after_secs: u64,
    },
    #[error("{}", declined_text(.code))]
    PaymentDeclined { code: String },
    #[error("the request body is larger than this route accepts")]
    PayloadTooLarge,
    #[error("the service is temporarily unavailable")]
    Unavailable(#[source] anyhow::Error),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// A declined card in words a shopper can act on; the provider's code stays in the text
/// for support.
fn declined_text(code: &str) -> String {
    let why = match code {
        "insufficient_funds" => "Your card was declined for insufficient funds.",
        "expired_card" => "Your card has expired.",
        "incorrect_cvc" | "incorrect_number" => "The card details were not accepted.",
        // The shopper's bank refused, or was refused, the 3-D Secure step (docs/payments.md).
        "payment_intent_authentication_failure" | "authentication_required" => {
            "Your bank did not confirm this payment."
        }
        _ => "Your card was declined.",
    };
    format!("{why} Nothing was charged; please try another card. (code: {code})")
}

impl ApiError {
    pub fn bad_request(problem: &'static str, detail: impl Into<String>) -> Self {
        Self::BadRequest {
            problem,
            detail: detail.into(),
        }
    }

    pub fn unprocessable(problem: &'static str, detail: impl Into<String>) -> Self {
        Self::Unprocessable {
            problem,
            detail: detail.into(),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::SessionRequired
            | Self::IdempotencyKeyMissing
            | Self::IdempotencyKeyMalformed(_)
            | Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::IdempotencyKeyReused
            | Self::InvalidDetails(_)
            | Self::CartChanged
            | Self::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::Refused { status, .. } => *status,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::PaymentDeclined { .. } => StatusCode::PAYMENT_REQUIRED,
            Self::RequestInProgress | Self::PaymentInProgress => StatusCode::CONFLICT,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::CrossSite => StatusCode::FORBIDDEN,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether the key stores this answer (a definitive refusal) or stays open for a retry:
    /// the protocol's rule ([`once_core::is_stored`]), except the shop's two 409s, which
    /// say "wait for the other request" (the same key's, or another payment of the order's)
    /// rather than "no".
    pub fn is_stored(&self) -> bool {
        once_core::is_stored(self.status()) && !is_a_wait(self.status())
    }

    /// This refusal as the answer of work whose transaction still commits (a declined
    /// card is recorded as a failed payment): stored and replayed like a success.
    pub fn reply(&self) -> Reply {
        Reply::new(
            self.status(),
            "application/problem+json",
            serde_json::to_vec(&self.to_problem()).unwrap_or_default(),
        )
    }

    fn problem_name(&self) -> &'static str {
        match self {
            Self::SessionRequired => "session-required",
            Self::IdempotencyKeyMissing => "idempotency-key-missing",
            Self::IdempotencyKeyMalformed(_) => "idempotency-key-malformed",
            Self::IdempotencyKeyReused => "idempotency-key-reused",
            Self::InvalidDetails(_) => "invalid-details",
            Self::RequestInProgress => "request-in-progress",
            Self::PaymentInProgress => "payment-in-progress",
            Self::CartChanged => "cart-changed",
            Self::NotFound => "not-found",
            Self::CrossSite => "cross-site-request",
            Self::BadRequest { problem, .. }
            | Self::Unprocessable { problem, .. }
            | Self::Unauthorized { problem, .. }
            | Self::Refused { problem, .. }
            | Self::TooManyRequests { problem, .. } => problem,
            Self::PaymentDeclined { .. } => "card-declined",
            Self::PayloadTooLarge => "payload-too-large",
            Self::Unavailable(_) => "service-unavailable",
            Self::Internal(_) => "internal-error",
        }
    }

    pub fn to_problem(&self) -> Problem {
        let status = self.status();
        Problem {
            problem_type: format!("https://once.example/problems/{}", self.problem_name()),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            retryable: !self.is_stored(),
            errors: match self {
                Self::InvalidDetails(problems) => Some(problems.clone()),
                _ => None,
            },
        }
    }
}

/// The RFC 9457 body, plus `retryable`: whether repeating the request with the same
/// Idempotency-Key can succeed. It agrees with what the executor does with the key: every
/// transient outcome (409, any 5xx) leaves the key `failed` or leased, never `completed`,
/// so the same key runs again (at once, or once the lease ends); definitive ones are
/// stored and replayed, so repeating them cannot change the answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// `https://once.example/problems/{name}`, one of the types the API reference lists.
    #[serde(rename = "type")]
    pub problem_type: String,
    /// The HTTP status's reason phrase.
    pub title: String,
    pub status: u16,
    /// What went wrong, in words safe to show a shopper.
    pub detail: String,
    /// Whether the same request with the same Idempotency-Key can still succeed.
    pub retryable: bool,
    /// With `invalid-details`: each field to fix (`email`, `shipping_address.city`, …) and
    /// what is wrong with it, in words for the shopper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldProblem>>,
}

/// The fields of a refusal, for its `detail`: "email: Enter …; shipping_address.city: …".
fn fields_in_words(problems: &[FieldProblem]) -> String {
    let words: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.field, p.detail))
        .collect();
    words.join("; ")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            Self::Internal(e) => tracing::error!(error = ?e, "internal error"),
            Self::Unavailable(e) => tracing::warn!(error = %e, "service unavailable"),
            _ => {}
        }
        let problem = self.to_problem();
        let mut response = (
            self.status(),
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            serde_json::to_vec(&problem).unwrap_or_default(),
        )
            .into_response();
        let retry_after = match &self {
            Self::TooManyRequests {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => problem.retryable.then_some(RETRY_AFTER_SECS),
        };
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        crate::db::note_lost_connection(&e);
        if once_events::db_error::is_transient(&e) {
            Self::Unavailable(e.into())
        } else {
            Self::Internal(e.into())
        }
    }
}

/// The protocol's own refusals, in the shop's words.
impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::KeyMissing => Self::IdempotencyKeyMissing,
            Refusal::KeyMalformed(e) => Self::IdempotencyKeyMalformed(e),
            Refusal::KeyReused => Self::IdempotencyKeyReused,
            Refusal::KeyUnknown => Self::NotFound,
            Refusal::InProgress => Self::RequestInProgress,
            Refusal::KeyQuota { retry_after_secs } => Self::TooManyRequests {
                problem: "key-quota",
                detail: "this session has made as many requests with new Idempotency-Keys \
                         in the last hour as it may; nothing was done"
                    .to_owned(),
                retry_after_secs,
            },
            Refusal::Store(e) => e.into(),
            Refusal::Panicked(what) => Self::Internal(anyhow::anyhow!(what)),
            stopping @ Refusal::Stopping => Self::Refused {
                status: stopping.status(),
                problem: "server-stopping",
                detail: stopping.detail(),
            },
            other => Self::Internal(anyhow::anyhow!("{other:?}")),
        }
    }
}

impl ProtocolError for ApiError {
    fn status(&self) -> StatusCode {
        ApiError::status(self)
    }

    fn is_stored(&self) -> bool {
        ApiError::is_stored(self)
    }
}

/// The shop answers 409 only for "another request is busy with this; wait": never a
/// definitive refusal, so never stored (docs/protocol.md).
pub fn is_a_wait(status: StatusCode) -> bool {
    status == StatusCode::CONFLICT
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        Self::Internal(e.into())
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        Self::Internal(e)
    }
}

/// The answer for any unknown route under `/api`.
pub async fn api_not_found() -> ApiError {
    ApiError::NotFound
}
