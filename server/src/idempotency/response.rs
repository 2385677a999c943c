//! What a write route answers, in the form the idempotency table stores and replays.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::error::ApiError;

/// A definitive business outcome: status, an optional `Location`, and a JSON body. Usually
/// a success; a refusal whose transaction must still commit (a declined card is recorded as
/// a failed payment) is a `Reply` too, built with [`Reply::refusal`].
pub struct Reply {
    pub status: StatusCode,
    pub location: Option<String>,
    pub content_type: &'static str,
    /// The JSON body, serialised once: these bytes are stored and sent.
    pub body: Vec<u8>,
}

impl Reply {
    pub fn created(location: String, body: impl Serialize) -> Result<Self, ApiError> {
        let body = serde_json::to_vec(&body).map_err(|e| ApiError::Internal(e.into()))?;
        Ok(Self {
            status: StatusCode::CREATED,
            location: Some(location),
            content_type: "application/json",
            body,
        })
    }

    pub fn refusal(error: &ApiError) -> Self {
        Self {
            status: error.status(),
            location: None,
            content_type: "application/problem+json",
            body: serde_json::to_vec(&error.to_problem()).unwrap_or_default(),
        }
    }
}

/// The exact bytes of a response, as stored with a completed key. The first answer and
/// every replay are built from this, so they are identical byte for byte.
#[derive(Clone, Debug)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub location: Option<String>,
    pub body: Vec<u8>,
}

impl StoredResponse {
    pub fn from_reply(reply: Reply) -> Self {
        Self {
            status: reply.status.as_u16(),
            content_type: reply.content_type.into(),
            location: reply.location,
            body: reply.body,
        }
    }

    /// A definitive business refusal (such as an unknown product) is stored like a success.
    pub fn from_error(error: &ApiError) -> Self {
        Self {
            status: error.status().as_u16(),
            content_type: "application/problem+json".into(),
            location: None,
            body: serde_json::to_vec(&error.to_problem()).unwrap_or_default(),
        }
    }

    pub fn headers_json(&self) -> serde_json::Value {
        serde_json::json!({ "content-type": self.content_type, "location": self.location })
    }

    pub fn from_parts(status: i16, headers: &serde_json::Value, body: Vec<u8>) -> Self {
        Self {
            status: status as u16,
            content_type: headers["content-type"]
                .as_str()
                .unwrap_or("application/json")
                .to_owned(),
            location: headers["location"].as_str().map(str::to_owned),
            body,
        }
    }

    pub fn into_response(self, replayed: bool) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, self.body).into_response();
        let headers = response.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&self.content_type) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        if let Some(v) = self
            .location
            .as_deref()
            .and_then(|l| HeaderValue::from_str(l).ok())
        {
            headers.insert(header::LOCATION, v);
        }
        if replayed {
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
        }
        response
    }
}
