//! The provider's error answers: `{"error": {"code", "message"}}`, as payment APIs do.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{1}")]
    BadRequest(&'static str, String),
    #[error("this Idempotency-Key was used with different parameters")]
    KeyReused,
    #[error("no such charge")]
    NotFound,
    #[error("internal error")]
    Internal(#[from] sqlx::Error),
}

impl IntoResponse for ProviderError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            Self::BadRequest(code, _) => (StatusCode::BAD_REQUEST, *code),
            Self::KeyReused => (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused"),
            Self::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Self::Internal(e) if refused_text(e) => {
                tracing::warn!(error = %e, "refused text the database cannot hold");
                (StatusCode::BAD_REQUEST, "invalid_request")
            }
            Self::Internal(e) => {
                tracing::error!(error = %e, "provider database error");
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
        };
        (
            status,
            Json(json!({ "error": { "code": code, "message": self.message() } })),
        )
            .into_response()
    }
}

impl ProviderError {
    fn message(&self) -> String {
        match self {
            Self::Internal(e) if refused_text(e) => {
                "text in this request cannot be stored (a NUL character?)".to_owned()
            }
            other => other.to_string(),
        }
    }
}

/// The database refused a parameter's text (a NUL, or bytes not in its encoding): the
/// request's fault, whichever field carried it, not an outage worth retrying.
fn refused_text(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "22021" || code == "22P05")
}
