//! A property of everything outside the API reference (schemathesis covers what is in it):
//! whatever arguments, encodings and sizes a client throws at a server function (`/_fn/…`)
//! or a form route, the answer is never a 5xx, and a refusal to a program is problem+json.

use proptest::{
    collection::vec,
    prelude::*,
    test_runner::{Config as RunnerConfig, TestCaseError, TestRunner},
};
use server::config::Rate;

use crate::helpers::*;

/// Every server function of the shop, and the routes its forms post to.
const TARGETS: &[&str] = &[
    "/_fn/list_products",
    "/_fn/get_cart",
    "/_fn/add_to_cart",
    "/_fn/set_cart_quantity",
    "/_fn/fresh_key",
    "/_fn/get_checkout",
    "/_fn/get_order",
    "/_fn/get_order_progress",
    "/_fn/list_orders",
    "/checkout",
    "/operator/login",
    "/operator/logout",
    "/operator/reconciliation/run",
];

const FIELDS: &[&str] = &[
    "sku",
    "quantity",
    "add_key",
    "id",
    "idempotency_key",
    "password",
    "csrf",
    "extra",
];

const CONTENT_TYPES: &[&str] = &[
    "application/x-www-form-urlencoded",
    "application/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/cbor",
];

/// A value as a hostile client might send it: a plausible one, a number out of range, text
/// with NUL and other control characters, or something long.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("MUG-001".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just(uuid::Uuid::new_v4().to_string()),
        "\\PC{0,40}",
        "[\\x00-\\x1f%&=+]{0,20}",
        (1usize..80_000).prop_map(|n| "x".repeat(n)),
    ]
}

/// A body: fields (some repeated, some missing) in one of the encodings, or raw bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let pairs = || vec((prop::sample::select(FIELDS), value()), 0..6);
    prop_oneof![
        pairs().prop_map(|pairs| {
            let form: Vec<_> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            serde_urlencoded::to_string(form).unwrap().into_bytes()
        }),
        pairs().prop_map(|pairs| {
            let object: serde_json::Map<_, _> = pairs
                .into_iter()
                .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v)))
                .collect();
            serde_json::to_vec(&object).unwrap()
        }),
        vec(any::<u8>(), 0..512),
    ]
}

#[test]
fn server_functions_and_forms_never_answer_a_5xx() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unlimited = Rate {
        per_second: 0,
        burst: 0,
    };
    let app = runtime.block_on(spawn_app_with(|c| {
        c.limits.per_client = unlimited;
        c.limits.writes_per_session = unlimited;
    }));
    // A connection per case: a pooled connection the server closes (its lifetime bound) just
    // as the client reuses it is a client race, not an answer of the shop's.
    let client = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    runtime.block_on(app.open_session(&client));
    let cases = std::env::var("FN_PROPERTY_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let input = (
        prop::sample::select(TARGETS),
        prop::sample::select(CONTENT_TYPES),
        body(),
        any::<bool>(),
    );
    runner
        .run(&input, |(target, content_type, body, browser)| {
            runtime.block_on(check(&app, &client, target, content_type, body, browser))
        })
        .unwrap();
}

async fn check(
    app: &TestApp,
    client: &reqwest::Client,
    target: &str,
    content_type: &str,
    body: Vec<u8>,
    browser: bool,
) -> Result<(), TestCaseError> {
    let mut request = client
        .post(app.url(target))
        .header("content-type", content_type)
        .body(body.clone());
    if browser {
        request = request.header("accept", "text/html");
    }
    let response = match request.send().await {
        Ok(response) => response,
        // A body over the shop's limit is answered (413) before it is all read, and the
        // connection closed: the client may see that as a failed write, never as a 5xx.
        Err(e) if body.len() > 64 * 1024 && e.is_request() => return Ok(()),
        Err(e) => panic!("an answer: {e:?}"),
    };
    let status = response.status();
    let answered = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.unwrap_or_default();
    let shown = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
    prop_assert!(
        !status.is_server_error(),
        "{target} ({content_type}) answered {status}: {text} to {shown:?}"
    );
    // A server function's own refusal keeps Leptos's encoding (the page decodes it); any
    // other refusal to a program is problem+json.
    let server_fn_refusal = text.starts_with("ServerError|");
    if status.is_client_error() && !browser && !server_fn_refusal {
        prop_assert!(
            answered == "application/problem+json",
            "{target} ({content_type}) answered {status} as {answered:?}: {text}"
        );
    }
    Ok(())
}
