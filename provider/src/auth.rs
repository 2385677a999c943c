//! The merchant's key: every `/v1/…` call must carry `Authorization: Bearer <key>`, the key
//! the provider was started with (`PROVIDER_API_KEY`), as a real provider's API asks for the
//! merchant's secret key. Without it anyone who can reach the provider could make a charge
//! under a merchant's reference, read its ledger, refund its charges or turn its chaos knobs.

use axum::{
    extract::{Request, State},
    http::{header, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The key callers must present, kept as its digest so the comparison takes the same time
/// whatever the guess.
#[derive(Clone)]
pub struct ApiKey([u8; 32]);

impl ApiKey {
    pub fn new(key: &str) -> Self {
        Self(Sha256::digest(key.as_bytes()).into())
    }

    fn admits(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.0).into()
    }
}

/// Middleware: a call without the key, or with another, is 401 in the provider's error shape.
pub async fn require_key(State(key): State<ApiKey>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(presented) if key.admits(presented) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({ "error": {
                "code": "unauthorized",
                "message": "send the merchant's key: Authorization: Bearer <PROVIDER_API_KEY>",
            }})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_key_itself_is_admitted() {
        let key = ApiKey::new("sk_sandbox_0123456789abcdef");
        assert!(key.admits("sk_sandbox_0123456789abcdef"));
        for other in [
            "",
            "sk_sandbox_0123456789abcdeF",
            "sk_sandbox_0123456789abcdef ",
        ] {
            assert!(!key.admits(other), "{other:?}");
        }
    }
}
