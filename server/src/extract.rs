//! `ApiJson`: axum's JSON extractor with rejections turned into problem+json answers, so
//! that bad input never reaches a handler and never produces a 500.

use axum::{
    extract::{rejection::JsonRejection, FromRequest, Request},
    Json,
};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(reject(rejection)),
        }
    }
}

fn reject(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::BytesRejection(ref r)
            if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE =>
        {
            ApiError::PayloadTooLarge
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::bad_request(
            "unsupported-media-type",
            "send the body as application/json",
        ),
        JsonRejection::JsonSyntaxError(e) => ApiError::bad_request("malformed-json", e.body_text()),
        JsonRejection::JsonDataError(e) => ApiError::bad_request("invalid-body", e.body_text()),
        other => ApiError::bad_request("invalid-body", other.body_text()),
    }
}
