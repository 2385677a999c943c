//! The ready extractors refuse bad input as problem+json, and take good input as it came.

use axum::{
    body::Body,
    http::{Request, StatusCode},
    routing::post,
    Router,
};
use once_axum::{HeaderScope, JsonBody, PathParams, Scope, ScopeHeader};
use serde_json::Value;
use tower::ServiceExt;

struct XApiKey;
impl ScopeHeader for XApiKey {
    const NAME: &'static str = "x-api-key";
}

/// An echo of what the extractors took: the scope, the path's number and the body.
fn routes() -> Router {
    let echo =
        |scope: HeaderScope<XApiKey>,
         PathParams(n): PathParams<u32>,
         JsonBody(body): JsonBody<Value>| async move { format!("{} {n} {body}", scope.scope()) };
    Router::new().route("/things/{n}", post(echo))
}

/// The answer to a POST to `path` with the scope header `scope` (none when `None`).
async fn answer(
    path: &str,
    scope: Option<&[u8]>,
    content_type: &str,
    body: &str,
) -> (StatusCode, String, String) {
    answer_with(path, scope.into_iter().collect(), content_type, body).await
}

/// The answer to a POST to `path` with a scope header for each of `scopes`.
async fn answer_with(
    path: &str,
    scopes: Vec<&[u8]>,
    content_type: &str,
    body: &str,
) -> (StatusCode, String, String) {
    let mut request = Request::post(path).header("content-type", content_type);
    for scope in scopes {
        request = request.header("x-api-key", scope);
    }
    let response = routes()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    (status, kind, String::from_utf8(body.to_vec()).unwrap())
}

/// The `type` of a problem+json answer's body, asserting that it is one.
fn problem_type(kind: &str, body: &str) -> String {
    assert_eq!(kind, "application/problem+json", "{body}");
    let problem: Value = serde_json::from_str(body).unwrap();
    problem["type"]
        .as_str()
        .unwrap()
        .rsplit('#')
        .next()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn good_input_is_taken_as_it_came() {
    let (status, _, body) = answer(
        "/things/7",
        Some(b"hotel-1"),
        "application/json",
        r#"{"a":1}"#,
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, r#"hotel-1 7 {"a":1}"#)
    );
}

#[tokio::test]
async fn a_missing_or_empty_scope_header_is_400() {
    for scope in [None, Some(&b""[..])] {
        let (status, kind, body) = answer("/things/7", scope, "application/json", "{}").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{scope:?}");
        assert_eq!(problem_type(&kind, &body), "scope-missing");
        assert!(
            body.contains("x-api-key"),
            "the answer names the header: {body}"
        );
    }
}

#[tokio::test]
async fn a_scope_too_long_or_not_visible_ascii_is_400() {
    let long = vec![b'k'; once_axum::extract::SCOPE_MAX_LEN + 1];
    let longest = vec![b'k'; once_axum::extract::SCOPE_MAX_LEN];
    for scope in [
        &long[..],
        &b"caf\xc3\xa9"[..],
        &b"k 1"[..],
        &b"k1\t"[..],
        &b" "[..],
    ] {
        let (status, kind, body) = answer("/things/7", Some(scope), "application/json", "{}").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(problem_type(&kind, &body), "scope-invalid");
    }
    let (status, _, _) = answer("/things/7", Some(&longest), "application/json", "{}").await;
    assert_eq!(status, StatusCode::OK, "the longest scope allowed is taken");
}

#[tokio::test]
async fn a_bad_body_or_path_is_a_problem_not_plain_text() {
    let cases = [
        (
            "/things/7",
            "application/json",
            "{",
            StatusCode::BAD_REQUEST,
            "body-invalid",
        ),
        (
            "/things/7",
            "text/plain",
            "{}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "body-invalid",
        ),
        (
            "/things/seven",
            "application/json",
            "{}",
            StatusCode::BAD_REQUEST,
            "path-invalid",
        ),
    ];
    for (path, content_type, sent, want, name) in cases {
        let (status, kind, body) = answer(path, Some(b"hotel-1"), content_type, sent).await;
        assert_eq!(status, want, "{path} {content_type} {sent}: {body}");
        assert_eq!(problem_type(&kind, &body), name);
    }
}

#[tokio::test]
async fn a_scope_header_sent_twice_is_400_not_either_scope() {
    let (status, kind, body) = answer_with(
        "/things/7",
        vec![&b"first"[..], &b"second"[..]],
        "application/json",
        "{}",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(problem_type(&kind, &body), "scope-invalid");
}

#[tokio::test]
async fn a_body_too_large_or_of_another_shape_is_a_problem() {
    let huge = format!("[{}0]", "0,".repeat(1_100_000));
    let (status, kind, body) =
        answer("/things/7", Some(b"hotel-1"), "application/json", &huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(problem_type(&kind, &body), "body-invalid");
}
