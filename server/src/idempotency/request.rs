//! One request under the protocol, and the extractor that reads its key: who sent it (the
//! scope), with which key, for which operation, with which fingerprint.

use axum::{
    extract::{FromRef, FromRequestParts},
    http::{request::Parts, Method},
};

use super::{
    fingerprint::{Fingerprint, FingerprintKeys},
    key::IdempotencyKey,
};
use crate::{error::ApiError, faults::FaultRequest};

/// One request under the protocol: who sent it (scope), with which key, and what it is.
///
/// `operation` is the operation's constant identity (`POST /api/orders`), never the path
/// a handler happens to see: axum strips a `nest` prefix, and the no-wasm checkout form
/// posts elsewhere, yet the same intent through either door must be the same request.
#[derive(Clone, Debug)]
pub struct IdempotentRequest {
    pub scope: String,
    pub key: IdempotencyKey,
    pub operation: String,
    pub fingerprint: Fingerprint,
    pub faults: FaultRequest,
}

impl IdempotentRequest {
    pub fn new(
        fingerprints: &FingerprintKeys,
        scope: &str,
        key: IdempotencyKey,
        operation: &str,
        body: &serde_json::Value,
    ) -> Self {
        Self {
            scope: scope.to_owned(),
            fingerprint: fingerprints.of(&Method::POST, operation, body),
            key,
            operation: operation.to_owned(),
            faults: FaultRequest::default(),
        }
    }

    pub fn with_faults(self, faults: FaultRequest) -> Self {
        Self { faults, ..self }
    }
}

/// Extractor for routes that require `Idempotency-Key`. The body is fingerprinted later,
/// once it has been parsed, together with the operation the handler names.
pub struct RequestKey {
    key: IdempotencyKey,
    faults: FaultRequest,
    fingerprints: FingerprintKeys,
}

impl RequestKey {
    /// The key and the faults, for an operation whose body the server builds itself.
    pub fn into_parts(self) -> (IdempotencyKey, FaultRequest) {
        (self.key, self.faults)
    }

    pub fn for_body(
        self,
        scope: &str,
        operation: &str,
        body: &serde_json::Value,
    ) -> IdempotentRequest {
        IdempotentRequest::new(&self.fingerprints, scope, self.key, operation, body)
            .with_faults(self.faults)
    }
}

impl<S> FromRequestParts<S> for RequestKey
where
    S: Send + Sync,
    FingerprintKeys: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get("idempotency-key")
            .ok_or(ApiError::IdempotencyKeyMissing)?;
        // Bytes outside visible ASCII fail `to_str`; parse them anyway for the precise error.
        let text = String::from_utf8_lossy(header.as_bytes());
        Ok(Self {
            key: IdempotencyKey::parse(&text)?,
            faults: FaultRequest::from_headers(&parts.headers),
            fingerprints: FingerprintKeys::from_ref(state),
        })
    }
}
