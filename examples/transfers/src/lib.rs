//! Transfers: a service that is not the shop, made exactly-once with the `once-*` crates.
//! Requests are scoped by an API key (`X-Api-Key`) instead of a session; `POST /transfers`
//! takes an `Idempotency-Key`; its tests run `once_axum::conformance` against it.

use axum::extract::{FromRef, FromRequestParts, State};
use axum::http::{request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{routing::post, Json, Router};
use once_axum::{status, Executor, Hooks, ProtocolError, Refusal, Reply, RequestKey};
use once_core::FingerprintKeys;
use serde::{Deserialize, Serialize};

#[derive(Clone)]
pub struct App<H> {
    pub executor: Executor<H>,
    pub fingerprints: FingerprintKeys,
}

impl<H: Clone> FromRef<App<H>> for FingerprintKeys {
    fn from_ref(app: &App<H>) -> Self {
        app.fingerprints.clone()
    }
}

impl<H: Clone> FromRef<App<H>> for sqlx::PgPool {
    fn from_ref(app: &App<H>) -> Self {
        app.executor.db.clone()
    }
}

/// `POST /transfers`, and `GET /idempotency-keys/{key}` for polling after a 409.
pub fn router<H: Hooks<Error = AppError>>(app: App<H>) -> Router {
    Router::new()
        .route("/transfers", post(create::<H>))
        .merge(status::router::<App<H>, ApiKey, AppError>())
        .with_state(app)
}

#[derive(Deserialize, Serialize)]
pub struct Transfer {
    from: String,
    to: String,
    amount_cents: i64,
}

async fn create<H: Hooks<Error = AppError>>(
    State(app): State<App<H>>,
    ApiKey(scope): ApiKey,
    key: RequestKey<AppError>,
    Json(body): Json<serde_json::Value>,
) -> Result<Response, AppError> {
    let transfer: Transfer = serde_json::from_value(body.clone()).map_err(AppError::invalid)?;
    let req = key.for_body(&scope, "POST /transfers", &body);
    Ok(app.executor.execute(req, move |db| async move {
        if transfer.amount_cents <= 0 {
            // A definitive refusal: stored with the key and replayed.
            return Err(AppError(StatusCode::UNPROCESSABLE_ENTITY, "amount must be positive".into()));
        }
        let mut tx = db.begin().await.map_err(Refusal::Store)?;
        let id = uuid::Uuid::new_v4();
        sqlx::query("INSERT INTO transfers (id, api_key, from_account, to_account, amount_cents) VALUES ($1, $2, $3, $4, $5)")
            .bind(id).bind(&scope).bind(&transfer.from).bind(&transfer.to).bind(transfer.amount_cents)
            .execute(&mut *tx).await.map_err(AppError::database)?;
        let reply = Reply::created(format!("/transfers/{id}"), &transfer).map_err(AppError::invalid)?;
        Ok((tx, reply))
    }).await)
}

/// The scope: the caller's API key.
pub struct ApiKey(pub String);

impl status::Scope for ApiKey {
    fn scope(&self) -> &str {
        &self.0
    }
}

impl<S: Sync> FromRequestParts<S> for ApiKey {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        let key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
        key.map(|k| ApiKey(k.to_owned())).ok_or(AppError(
            StatusCode::UNAUTHORIZED,
            "X-Api-Key required".into(),
        ))
    }
}

#[derive(Debug)]
pub struct AppError(pub StatusCode, pub String);

impl AppError {
    fn invalid(e: serde_json::Error) -> Self {
        Self(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
    }

    /// Data the database refuses (class 22, 23: a NUL in a text, a broken constraint) is the
    /// request's fault, a definitive 422; anything else may pass, a 503.
    fn database(e: sqlx::Error) -> Self {
        match e.as_database_error().and_then(|d| d.code()) {
            Some(code) if code.starts_with("22") || code.starts_with("23") => Self(
                StatusCode::UNPROCESSABLE_ENTITY,
                "the database refused the transfer".into(),
            ),
            _ => Refusal::Store(e).into(),
        }
    }
}

impl From<Refusal> for AppError {
    fn from(refusal: Refusal) -> Self {
        let status = match &refusal {
            Refusal::KeyMissing | Refusal::KeyMalformed(_) => StatusCode::BAD_REQUEST,
            Refusal::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Refusal::KeyUnknown => StatusCode::NOT_FOUND,
            Refusal::InProgress => StatusCode::CONFLICT,
            Refusal::KeyQuota { .. } => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::Panicked(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self(status, format!("{refusal:?}"))
    }
}

impl ProtocolError for AppError {
    fn status(&self) -> StatusCode {
        self.0
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let retry = once_core::is_stored(self.0).then_some(()).is_none();
        let mut response = (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response();
        if retry {
            response.headers_mut().insert("retry-after", 1.into());
        }
        response
    }
}
