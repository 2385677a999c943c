//! Refusals that the frameworks write themselves, in the shop's words. axum's extractors
//! answer a bad path (`%FF`), query or form with `text/plain`, and a server function whose
//! arguments do not parse answers 500 `Args|…`, as if the shop had failed. Here every such
//! answer becomes what the shop's own refusals are: a 4xx `application/problem+json` for
//! API clients and script calls, and a plain page for a browser that asked for one. Nothing
//! was acted on in any of these cases: the refusal happened before the handler ran.

use axum::{
    body::{to_bytes, Body, Bytes},
    extract::{Request, State},
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};

use crate::error::ApiError;

/// Where server functions live; their arguments are checked here before Leptos reads them.
const SERVER_FN_PREFIX: &str = "/_fn/";
/// The most of a refusal's text that is read (a framework's are one line; a server
/// function's own failure is a short code).
const MAX_REFUSAL_TEXT: usize = 64 * 1024;

/// The largest request body a server function call may send, as `MAX_BODY_BYTES` says.
#[derive(Clone, Copy)]
pub struct ServerFnBodyLimit(pub usize);

/// Middleware on the Leptos routes: a server function's body is read here, with the
/// shop's size bound (413) and required to be UTF-8 text (400), so Leptos never sees a body
/// it would fail on with a 500. Its answer goes through [`framework_refusals`] afterwards.
pub async fn server_fn_bodies(
    State(ServerFnBodyLimit(limit)): State<ServerFnBodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    if !request.uri().path().starts_with(SERVER_FN_PREFIX) || request.method() == Method::GET {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let page = wants_page(&parts.headers);
    let bytes = match to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) if is_over_limit(&e) => return refuse(ApiError::PayloadTooLarge, page),
        Err(e) => {
            let error = ApiError::bad_request(
                "invalid-arguments",
                format!("the call's body could not be read: {e}"),
            );
            return refuse(error, page);
        }
    };
    if std::str::from_utf8(&bytes).is_err() {
        let error = ApiError::bad_request(
            "invalid-arguments",
            "the call's arguments are not UTF-8 text",
        );
        return refuse(error, page);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Whether reading a body failed because it was longer than the bound, rather than because
/// it was not well framed (a broken chunk) or the client went away.
fn is_over_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = source {
        if error.to_string().contains("length limit exceeded") {
            return true;
        }
        source = error.source();
    }
    false
}

/// Middleware around everything: a 4xx written as plain text, or a server function's 500
/// that says its arguments did not parse, is answered as the shop answers a refusal.
pub async fn framework_refusals(request: Request, next: Next) -> Response {
    let page = wants_page(request.headers());
    let response = next.run(request).await;
    let status = response.status();
    let server_fn = response.headers().contains_key("serverfnerror");
    let plain_4xx = status.is_client_error() && is_plain_text(response.headers());
    let server_fn_failure = server_fn && status == StatusCode::INTERNAL_SERVER_ERROR;
    if !(plain_4xx || server_fn_failure) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = to_bytes(body, MAX_REFUSAL_TEXT).await.unwrap_or_default();
    let text = readable(&bytes);
    let error = if server_fn {
        match argument_error(&text) {
            Some(detail) => ApiError::bad_request("invalid-arguments", detail),
            // The function's own failure, logged where it happened: passed on as it was.
            None => return Response::from_parts(parts, Body::from(bytes)),
        }
    } else {
        refusal_for(status, text)
    };
    refuse(error, page)
}

/// The problem for a framework's plain-text refusal with `status`.
fn refusal_for(status: StatusCode, text: String) -> ApiError {
    let detail = if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    #[rustfmt::skip]
    let refusal = match status {
        StatusCode::NOT_FOUND => ApiError::NotFound,
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        StatusCode::FORBIDDEN => ApiError::Refused { status, problem: "forbidden", detail },
        StatusCode::METHOD_NOT_ALLOWED => ApiError::Refused { status, problem: "method-not-allowed", detail },
        StatusCode::REQUEST_TIMEOUT => ApiError::Refused { status, problem: "request-timeout", detail },
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::Refused { status, problem: "unsupported-content-type", detail },
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::Refused { status, problem: "invalid-body", detail },
        _ => ApiError::Refused { status, problem: "bad-request", detail },
    };
    refusal
}

/// The words of a server function's failure to read its arguments (`Args|…`,
/// `MissingArg|…`, `Deserialization|…`); `None` for a failure of the function itself.
fn argument_error(body: &str) -> Option<String> {
    let (kind, detail) = body.split_once('|')?;
    matches!(kind, "Args" | "MissingArg" | "Deserialization" | "Request")
        .then(|| format!("the call's arguments are not valid: {detail}"))
}

fn refuse(error: ApiError, page: bool) -> Response {
    if page {
        refusal_page(&error)
    } else {
        error.into_response()
    }
}

/// A browser that asked for a page (an address typed or followed, a form posted without
/// wasm) is shown one; script calls and API clients get problem+json.
pub fn wants_page(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

fn is_plain_text(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.starts_with("text/plain"))
}

/// The text of a refusal, one line, without control characters.
fn readable(bytes: &Bytes) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

fn refusal_page(error: &ApiError) -> Response {
    let status = error.status();
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title} · Once</title></head><body>\
         <h1>The shop could not use this request</h1><p>{detail}</p>\
         <p>Nothing was changed. <a href=\"/\">Go to the shop</a></p></body></html>",
        title = escape(status.canonical_reason().unwrap_or("Refused")),
        detail = escape(&error.to_string()),
    );
    (status, Html(page)).into_response()
}

fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            other => other.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_failures_are_told_apart_from_the_functions_own() {
        assert!(argument_error("Args|missing field `add_key`").is_some());
        assert!(argument_error("MissingArg|sku").is_some());
        assert_eq!(argument_error("ServerError|our-failure"), None);
        assert_eq!(argument_error("no bar at all"), None);
    }

    #[test]
    fn a_refusal_page_shows_no_markup_it_was_sent() {
        let error = refusal_for(StatusCode::BAD_REQUEST, "<script>x</script>".to_owned());
        assert!(escape(&error.to_string()).starts_with("&lt;script&gt;"));
    }
}
