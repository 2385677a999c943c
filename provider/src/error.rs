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
            Self::Internal(e) => {
                tracing::error!(error = %e, "provider database error");
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
        };
        (
            status,
            Json(json!({ "error": { "code": code, "message": self.to_string() } })),
        )
            .into_response()
    }
}
