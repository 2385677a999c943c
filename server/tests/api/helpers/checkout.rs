//! Helpers for checkout tests: the cart, the checkout page's key, and both checkout doors.

use super::{details, TestApp, DETAILS_FORM};

pub async fn add_mugs(app: &TestApp, client: &reqwest::Client) {
    app.add_to_cart(client, "MUG-001", 2).await;
}

pub fn form_request(
    app: &TestApp,
    client: &reqwest::Client,
    key: &str,
    held_at: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut form = vec![("idempotency_key", key)];
    form.extend_from_slice(DETAILS_FORM);
    let request = client.post(app.url("/checkout")).form(&form);
    match held_at {
        Some(gate) => request.header("once-test-hold", gate),
        None => request,
    }
}

pub async fn submit_form(
    app: &TestApp,
    client: &reqwest::Client,
    key: &str,
    held_at: Option<&str>,
) -> reqwest::Response {
    form_request(app, client, key, held_at)
        .send()
        .await
        .unwrap()
}

/// Submits the form in the background (the shopper's first click, or a second one).
pub fn spawn_form(
    app: &TestApp,
    key: &str,
    held_at: Option<&str>,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let request = form_request(app, &app.client, key, held_at);
    tokio::spawn(async move { request.send().await.unwrap() })
}

pub fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 303, "a redirect, never an error page");
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// The key the checkout page's form carries.
pub async fn page_key(app: &TestApp, client: &reqwest::Client) -> String {
    key_in(&app.get_text(client, "/checkout").await)
}

/// The key in a checkout page's HTML.
pub fn key_in(html: &str) -> String {
    let field = html
        .find(r#"name="idempotency_key""#)
        .expect("the form's key field");
    let rest = &html[field..];
    let value = rest.find(r#"value=""#).expect("a value") + r#"value=""#.len();
    rest[value..][..rest[value..].find('"').unwrap()].to_owned()
}

/// `POST /api/checkout` under `key`, as the hydrated checkout page sends it.
pub async fn checkout_api(app: &TestApp, key: &str) -> reqwest::Response {
    checkout_api_with(app, key, &[]).send().await.unwrap()
}

/// `POST /api/checkout` under `key` with `headers` (a hold, `Prefer: wait`), to send.
pub fn checkout_api_with(
    app: &TestApp,
    key: &str,
    headers: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut request = app
        .client
        .post(app.url("/api/checkout"))
        .header("idempotency-key", key)
        .json(&details());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
}
