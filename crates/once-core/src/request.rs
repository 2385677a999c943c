//! One request under the protocol: who sent it (the scope), with which key, for which
//! operation, with which fingerprint.

use http::Method;
use serde_json::Value;

use crate::{fingerprint::Fingerprint, FingerprintKeys, IdempotencyKey};

/// One request under the protocol.
///
/// `scope` is whatever the application keys requests by (a session, a user, an API key):
/// the same key in two scopes names two requests. `operation` is the operation's constant
/// identity (`POST /api/orders`), never the path a handler happens to see, so the same
/// intent through two doors (an API route and a form) is the same request.
#[derive(Clone, Debug)]
pub struct IdempotentRequest {
    pub scope: String,
    pub key: IdempotencyKey,
    pub method: Method,
    pub operation: String,
    pub fingerprint: Fingerprint,
}

impl IdempotentRequest {
    pub fn new(
        fingerprints: &FingerprintKeys,
        method: Method,
        scope: &str,
        key: IdempotencyKey,
        operation: &str,
        body: &Value,
    ) -> Self {
        Self {
            scope: scope.to_owned(),
            fingerprint: fingerprints.of(&method, operation, body),
            key,
            method,
            operation: operation.to_owned(),
        }
    }
}
