//! The extractors of a request's `Idempotency-Key`. The body is fingerprinted later, once it
//! has been parsed, together with the scope, the operation and its parameters.
//!
//! * [`Keyed`]: the key with the caller's scope, for an application that declares its
//!   scope once ([`Scoped`]); the handlers and the key-status route
//!   ([`crate::status::router`]) then read the same scope by construction.
//! * [`RequestKey`]: the key alone, for an application that finds its scope its own way.
//! * [`HeaderScope`]: a ready scope, one request header's value (an API key).
//! * [`JsonBody`] and [`PathParams`]: axum's `Json` and `Path`, refused as a [`Problem`].

use std::marker::PhantomData;

use axum::{
    extract::{FromRef, FromRequest, FromRequestParts, Path, Request},
    http::{request::Parts, Method, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use once_core::{FingerprintKeys, IdempotencyKey, IdempotentRequest, KeyError};
use serde::{de::DeserializeOwned, Serialize};

use crate::{problem::ProtocolError, refusal::Refusal, Problem};

/// What scopes an application's keys: the scope's extractor reads who is calling (an API
/// key, a user, a session) and names them.
pub trait Scope {
    /// The string keys are stored under: the same key in two scopes is two requests.
    fn scope(&self) -> &str;
}

/// An application's state declares its scope's extractor once; [`Keyed`] and
/// [`crate::status::router`] both use it, so they cannot disagree.
pub trait Scoped: Clone + Send + Sync + 'static {
    /// The extractor of the caller's scope.
    type Scope: Scope + FromRequestParts<Self> + Send;

    /// The waits of the state's executor, if it has any: the key-status route then answers
    /// a `Prefer: wait` as a long poll. None by default.
    fn waits(&self) -> Option<crate::executor::wait::Waits> {
        None
    }
}

/// A route's `Idempotency-Key`, required: a missing or malformed header is refused with the
/// application's error `E` (400) before anything else runs.
pub struct RequestKey<E = Problem> {
    /// The key the client sent.
    pub key: IdempotencyKey,
    /// How long the client waits for a running request of its key (`Prefer: wait`).
    pub wait: Option<std::time::Duration>,
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
        self.for_operation(scope, operation, &[], body)
    }

    /// The request under the protocol: this key, in `scope`, for `operation` on the
    /// resource `params` name (the path's parameters: `[("id", id)]`), with `body`. One key
    /// sent to two resources is then refused (422), never answered with the other's reply.
    pub fn for_operation(
        self,
        scope: &str,
        operation: &str,
        params: &[(&str, &str)],
        body: &serde_json::Value,
    ) -> IdempotentRequest {
        IdempotentRequest::with_params(
            &self.fingerprints,
            self.method,
            scope,
            self.key,
            operation,
            params,
            body,
        )
        .with_wait(self.wait)
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
            wait: prefer_wait(&parts.headers),
            method: parts.method.clone(),
            fingerprints: FingerprintKeys::from_ref(state),
            error: PhantomData,
        })
    }
}

/// The `wait` of a request's `Prefer` headers (see [`once_core::prefer`]); a header that is
/// not text is ignored, like any preference not understood.
pub fn prefer_wait(headers: &axum::http::HeaderMap) -> Option<std::time::Duration> {
    once_core::prefer::wait(
        headers
            .get_all("prefer")
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// The caller's scope and `Idempotency-Key`, for a state that is [`Scoped`] by `Sc`: a
/// missing scope is refused as its extractor refuses, a missing or malformed key as a
/// [`Problem`] (400).
///
/// ```
/// use axum::{extract::FromRequestParts, http::{request::Parts, StatusCode}};
/// use once_axum::{Keyed, Problem, Scope, Scoped};
///
/// #[derive(Clone)]
/// struct App { fingerprints: once_core::FingerprintKeys }
/// impl axum::extract::FromRef<App> for once_core::FingerprintKeys {
///     fn from_ref(app: &App) -> Self { app.fingerprints.clone() }
/// }
///
/// /// Callers are told apart by their `X-Api-Key`.
/// struct ApiKey(String);
/// impl Scope for ApiKey {
///     fn scope(&self) -> &str { &self.0 }
/// }
/// impl<S: Sync> FromRequestParts<S> for ApiKey {
///     type Rejection = Problem;
///     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
///         let key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
///         let key = key.ok_or(Problem::new(StatusCode::UNAUTHORIZED, "api-key-missing", "X-Api-Key required"))?;
///         Ok(ApiKey(key.to_owned()))
///     }
/// }
/// impl Scoped for App { type Scope = ApiKey; }
///
/// // A handler takes `Keyed<ApiKey>`: any other scope type would not compile for `App`.
/// async fn cancel(
///     keyed: Keyed<ApiKey>,
///     axum::extract::Path(id): axum::extract::Path<String>,
/// ) -> Result<String, Problem> {
///     let req = keyed.request_on("POST /bookings/{id}/cancel", &[("id", &id)], &())?;
///     Ok(req.scope)
/// }
/// let _routes: axum::Router<App> =
///     axum::Router::new().route("/bookings/{id}/cancel", axum::routing::post(cancel));
/// ```
pub struct Keyed<Sc> {
    /// The caller's scope, as its extractor read it.
    pub scope: Sc,
    key: RequestKey<Problem>,
}

impl<Sc: Scope> Keyed<Sc> {
    /// The key the client sent.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key.key
    }

    /// The request under the protocol: this key in this scope, for `operation` with `body`.
    pub fn request(
        self,
        operation: &str,
        body: &impl Serialize,
    ) -> Result<IdempotentRequest, Problem> {
        self.request_on(operation, &[], body)
    }

    /// The request under the protocol: this key in this scope, for `operation` on the
    /// resource `params` name, with `body`. `Err` only when `body` cannot be serialised.
    pub fn request_on(
        self,
        operation: &str,
        params: &[(&str, &str)],
        body: &impl Serialize,
    ) -> Result<IdempotentRequest, Problem> {
        let body = serde_json::to_value(body).map_err(|e| {
            tracing::error!(error = %e, "a request body that does not serialise");
            Problem::from(Refusal::Panicked(e.to_string()))
        })?;
        let scope = self.scope.scope().to_owned();
        Ok(self.key.for_operation(&scope, operation, params, &body))
    }
}

impl<S> FromRequestParts<S> for Keyed<S::Scope>
where
    S: Scoped,
    FingerprintKeys: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let scope = S::Scope::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let key = RequestKey::<Problem>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self { scope, key })
    }
}

/// The request header a [`HeaderScope`] reads.
pub trait ScopeHeader: Send + Sync + 'static {
    /// The header's name, in lower case (`"x-api-key"`).
    const NAME: &'static str;
}

/// The longest scope a [`HeaderScope`] takes, in bytes: it is stored with every key.
pub const SCOPE_MAX_LEN: usize = 200;

/// A scope read from the request header `H::NAME`: callers that send different values are
/// kept apart, as an API key does. A missing or empty header is refused 400 `scope-missing`;
/// a header sent twice, or one longer than [`SCOPE_MAX_LEN`] bytes or not all visible ASCII
/// (no space, no tab), 400 `scope-invalid`.
///
/// The value is stored as it came, as the scope of each key. It tells callers apart and
/// proves nothing: any caller may send any value, so it neither authenticates nor bounds a
/// caller's keys (a new value is a new scope, with a quota of its own), and a value may equal
/// a scope another [`Scope`] of the same key table stores. Behind something that
/// authenticates callers, or after checking the value, scope by the identity it proves.
///
/// ```
/// use once_axum::{HeaderScope, ScopeHeader, Scoped};
///
/// struct XApiKey;
/// impl ScopeHeader for XApiKey { const NAME: &'static str = "x-api-key"; }
///
/// #[derive(Clone)]
/// struct App;
/// impl Scoped for App { type Scope = HeaderScope<XApiKey>; }
/// ```
#[derive(Clone, Debug)]
pub struct HeaderScope<H> {
    value: String,
    header: PhantomData<fn() -> H>,
}

impl<H> Scope for HeaderScope<H> {
    fn scope(&self) -> &str {
        &self.value
    }
}

impl<H: ScopeHeader, S: Sync> FromRequestParts<S> for HeaderScope<H> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let invalid = || {
            let detail = format!(
                "Send {} once, as visible ASCII of at most {SCOPE_MAX_LEN} bytes.",
                H::NAME
            );
            Problem::new(StatusCode::BAD_REQUEST, "scope-invalid", detail)
        };
        let mut values = parts.headers.get_all(H::NAME).iter();
        let value = values.next().filter(|v| !v.is_empty()).ok_or_else(|| {
            let detail = format!("Send your {} header.", H::NAME);
            Problem::new(StatusCode::BAD_REQUEST, "scope-missing", detail)
        })?;
        let visible = value.as_bytes().iter().all(u8::is_ascii_graphic);
        if values.next().is_some() || !visible || value.len() > SCOPE_MAX_LEN {
            return Err(invalid());
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        Ok(Self {
            value,
            header: PhantomData,
        })
    }
}

/// A JSON request body, as axum's `Json` reads it, refused as a [`Problem`]
/// (`body-invalid`: 400, 413, 415 or 422) so that a handler needs no rejection of its own.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let Json(body) = Json::<T>::from_request(request, state).await?;
        Ok(Self(body))
    }
}

/// A path's parameters, as axum's `Path` reads them, refused as a [`Problem`]
/// (`path-invalid`, 400).
pub struct PathParams<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathParams<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        let Path(params) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(Self(params))
    }
}
