//! What work answers, in the form the key table stores and replays.

use axum::{
    body::Body,
    http::{header, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use once_core::StoredResponse;
use serde::Serialize;

/// A definitive outcome of the work: status, headers and body, stored with the key and
/// replayed byte for byte. A `Reply` is always definitive when its status is (a 2xx, a 4xx
/// other than 408 and 429): an answer that means "not now" is an error of the work's
/// ([`crate::ProtocolError::is_stored`]), never a `Reply`. Usually a success; a refusal whose transaction must still
/// commit (a declined card is recorded as a failed payment) is a `Reply` too.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status: a 2xx, or a 4xx the work decided (stored like a success).
    pub status: StatusCode,
    /// The answer's own headers (lower-case names), stored and replayed with it.
    pub headers: Vec<(String, String)>,
    /// The body, serialised once: these bytes are stored and sent.
    pub body: Vec<u8>,
}

impl Reply {
    /// `status` with `body` as JSON.
    pub fn json(status: StatusCode, body: &impl Serialize) -> Result<Self, serde_json::Error> {
        Ok(Self::new(
            status,
            "application/json",
            serde_json::to_vec(body)?,
        ))
    }

    /// 201 Created, with the new resource's `Location` and its JSON.
    pub fn created(location: String, body: &impl Serialize) -> Result<Self, serde_json::Error> {
        Ok(Self::json(StatusCode::CREATED, body)?.with_header("location", location))
    }

    /// `status` with `body` of `content_type`.
    pub fn new(status: StatusCode, content_type: &str, body: Vec<u8>) -> Self {
        Self {
            status,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body,
        }
    }

    /// Adds a header that is stored and replayed with the answer.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The answer in the form the key table stores.
    pub fn into_stored(self) -> StoredResponse {
        StoredResponse::new(self.status.as_u16(), self.headers, self.body)
    }
}

/// The response for a stored answer; a replay says so with `Idempotent-Replayed: true`.
pub fn respond(stored: StoredResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Body::from(stored.body)).into_response();
    let headers = response.headers_mut();
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    if !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if replayed {
        headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// The headers of a refusal that belong to the answer itself; the rest (`Retry-After`,
/// caching, tracing, rate-limit counters) describe one delivery and are not replayed.
const REFUSAL_HEADERS: [&str; 4] = ["content-type", "content-language", "location", "link"];

/// The most of a refusal's body that is stored: a problem document is a few hundred bytes.
const MAX_REFUSAL_BODY: usize = 64 * 1024;

/// An error's response, read into the stored form: a definitive refusal is stored with the
/// key as it was first sent. The body is read within `within` and up to a bound, so a
/// streaming or huge body fails here (and the key is left open) instead of hanging.
pub async fn stored_from(
    response: Response,
    within: std::time::Duration,
) -> Result<StoredResponse, String> {
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(within, axum::body::to_bytes(body, MAX_REFUSAL_BODY))
        .await
        .map_err(|_| "the refusal's body was not read in time".to_owned())?
        .map_err(|e| e.to_string())?;
    let headers = parts
        .headers
        .iter()
        .filter(|(n, _)| REFUSAL_HEADERS.contains(&n.as_str()))
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    Ok(StoredResponse::new(
        parts.status.as_u16(),
        headers,
        body.to_vec(),
    ))
}
