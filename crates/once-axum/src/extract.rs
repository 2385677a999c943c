//! The extractor of a request's `Idempotency-Key`. The body is fingerprinted later, once it
//! has been parsed, together with the scope and the operation the handler names.

use std::marker::PhantomData;

use axum::{
    extract::{FromRef, FromRequestParts},
    http::{request::Parts, Method},
};
use once_core::{FingerprintKeys, IdempotencyKey, IdempotentRequest, KeyError};

use crate::hooks::{ProtocolError, Refusal};

/// A route's `Idempotency-Key`, required: a missing or malformed header is refused with the
/// application's error `E` (400) before anything else runs.
pub struct RequestKey<E> {
    pub key: IdempotencyKey,
    method: Method,
    fingerprints: FingerprintKeys,
    error: PhantomData<fn() -> E>,
}

impl<E> RequestKey<E> {
    /// The request under the protocol: this key, in `scope`, for `operation` with `body`.
    pub fn for_body(
        self,
        scope: &str,
        operation: &str,
        body: &serde_json::Value,
    ) -> IdempotentRequest {
        IdempotentRequest::new(
            &self.fingerprints,
            self.method,
            scope,
            self.key,
            operation,
            body,
        )
    }
}

impl<S, E> FromRequestParts<S> for RequestKey<E>
where
    S: Send + Sync,
    FingerprintKeys: FromRef<S>,
    E: ProtocolError,
{
    type Rejection = E;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let mut headers = parts.headers.get_all("idempotency-key").iter();
        let header = headers.next().ok_or(Refusal::KeyMissing)?;
        if headers.next().is_some() {
            return Err(Refusal::KeyMalformed(KeyError::Repeated).into());
        }
        // Bytes outside visible ASCII fail `to_str`; parse them anyway for the precise error.
        let text = String::from_utf8_lossy(header.as_bytes());
        Ok(Self {
            key: IdempotencyKey::parse(&text).map_err(Refusal::KeyMalformed)?,
            method: parts.method.clone(),
            fingerprints: FingerprintKeys::from_ref(state),
            error: PhantomData,
        })
    }
}
