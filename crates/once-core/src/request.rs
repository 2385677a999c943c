//! One request under the protocol: who sent it (the scope), with which key, for which
//! operation, with which fingerprint.

use std::time::{Duration, Instant};

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
#[non_exhaustive]
pub struct IdempotentRequest {
    /// Who sent it: keys are unique per scope.
    pub scope: String,
    /// The client's `Idempotency-Key`.
    pub key: IdempotencyKey,
    /// The request's method.
    pub method: Method,
    /// The operation's constant identity, stored with the key.
    pub operation: String,
    /// What tells this request apart from another under the same key.
    pub fingerprint: Fingerprint,
    /// How long the client will wait for the answer of its key's request if that request is
    /// still running (`Prefer: wait`, see [`crate::prefer`]); `None`: it is told at once.
    pub wait: Option<Duration>,
    /// When the request was made into this value: a wait counts from it.
    received: Instant,
}

/// A key as used for an operation in a scope, without the request's body: what a repeat is
/// about, when the caller names a key but has no body to fingerprint (a form whose cart
/// has moved on asks what its key holds).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct KeyedOperation<'a> {
    /// Who sent it.
    pub scope: &'a str,
    /// The key.
    pub key: &'a IdempotencyKey,
    /// The operation's constant identity.
    pub operation: &'a str,
}

impl<'a> KeyedOperation<'a> {
    /// `key` in `scope`, for `operation`.
    pub fn new(scope: &'a str, key: &'a IdempotencyKey, operation: &'a str) -> Self {
        Self {
            scope,
            key,
            operation,
        }
    }
}

impl IdempotentRequest {
    /// The request's scope, key and operation.
    pub fn keyed_operation(&self) -> KeyedOperation<'_> {
        KeyedOperation::new(&self.scope, &self.key, &self.operation)
    }

    /// The request `key` names in `scope`: `operation` with `body` and no parameters.
    pub fn new(
        fingerprints: &FingerprintKeys,
        method: Method,
        scope: &str,
        key: IdempotencyKey,
        operation: &str,
        body: &Value,
    ) -> Self {
        Self::with_params(fingerprints, method, scope, key, operation, &[], body)
    }

    /// The request `key` names in `scope`: `operation` on the resource `params` name (the
    /// path's parameters), with `body`. The parameters are fingerprinted, so one key sent
    /// to two resources is two requests.
    pub fn with_params(
        fingerprints: &FingerprintKeys,
        method: Method,
        scope: &str,
        key: IdempotencyKey,
        operation: &str,
        params: &[(&str, &str)],
        body: &Value,
    ) -> Self {
        Self {
            scope: scope.to_owned(),
            fingerprint: fingerprints.of_operation(&method, operation, params, body),
            key,
            method,
            operation: operation.to_owned(),
            wait: None,
            received: Instant::now(),
        }
    }

    /// The same request, waiting up to `wait` for a running request of its key
    /// (`Prefer: wait`, see [`crate::prefer`]).
    pub fn with_wait(mut self, wait: Option<Duration>) -> Self {
        self.wait = wait;
        self
    }

    /// Until when the request may wait for a running request of its key, counted from
    /// when it was received, and at most `longest`: `None` if it asked for no wait (or
    /// for none at all, `wait=0`).
    pub fn wait_until(&self, longest: Duration) -> Option<Instant> {
        let wait = self.wait?.min(longest);
        (!wait.is_zero()).then(|| self.received + wait)
    }
}
