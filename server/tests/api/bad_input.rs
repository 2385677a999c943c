//! Bad input: a clear 4xx problem+json, never a 500, and nothing stored.

use crate::helpers::*;

async fn assert_nothing_stored(app: &TestApp) {
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);
    assert_eq!(app.count("outbox_events").await, 0);
}

#[tokio::test]
async fn malformed_bodies_are_refused_before_anything_is_stored() {
    let app = spawn_app().await;
    let cases: &[(&str, u16, &str)] = &[
        (r#"{"items":[{"sku":"MUG-001","quan"#, 400, "malformed-json"),
        ("not json at all", 400, "malformed-json"),
        (r#"{"items":"MUG-001"}"#, 400, "invalid-body"),
        (
            r#"{"items":[{"sku":42,"quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            400,
            "invalid-body",
        ),
        (
            r#"{"items":[{"sku":"MUG-001","quantity":"2"}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            400,
            "invalid-body",
        ),
        (
            r#"{"items":[{"sku":"MUG-001","quantity":1,"price_cents":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            400,
            "invalid-body",
        ),
        (r#"{}"#, 400, "invalid-body"),
        (
            r#"{"items":[],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            422,
            "invalid-order",
        ),
        (
            r#"{"items":[{"sku":"MUG-001","quantity":0}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            422,
            "invalid-order",
        ),
        (
            r#"{"items":[{"sku":"MUG-001","quantity":1000000}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            422,
            "invalid-order",
        ),
        (
            r#"{"items":[{"sku":"MUG-001","quantity":-1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
            422,
            "invalid-order",
        ),
    ];
    for (i, (body, status, problem)) in cases.iter().enumerate() {
        let response = post_order(&app.client, &app, Some(&format!("bad-{i}")), body).await;
        assert_problem(response, *status, problem).await;
    }
    let twenty_one: Vec<serde_json::Value> = (0..21)
        .map(|i| serde_json::json!({"sku": format!("S{i}"), "quantity": 1}))
        .collect();
    let body = order_with(twenty_one.into()).to_string();
    let response = post_order(&app.client, &app, Some("bad-lines"), &body).await;
    assert_problem(response, 422, "invalid-order").await;
    assert_nothing_stored(&app).await;
}

#[tokio::test]
async fn an_oversize_body_is_413() {
    let app = spawn_app().await;
    let padding = "x".repeat(2 * 1024 * 1024);
    let body = format!(r#"{{"items":[{{"sku":"{padding}","quantity":1}}]}}"#);
    let response = post_order(&app.client, &app, Some("huge-1"), &body).await;
    assert_problem(response, 413, "payload-too-large").await;
    assert_nothing_stored(&app).await;
}

#[tokio::test]
async fn a_wrong_content_type_is_a_4xx_problem() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/api/orders"))
        .header("idempotency-key", "ct-1")
        .header("content-type", "text/plain")
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    assert_problem(response, 400, "unsupported-media-type").await;
    assert_nothing_stored(&app).await;
}

#[tokio::test]
async fn odd_keys_are_refused_and_nothing_is_stored() {
    let app = spawn_app().await;
    let long = "k".repeat(300);
    for key in [long.as_str(), "ctl\u{9}char", "\"half-quoted"] {
        let response = post_order(&app.client, &app, Some(key), MUG_ORDER).await;
        assert_problem(response, 400, "idempotency-key-malformed").await;
    }
    let status = app
        .client
        .get(app.url(&format!("/api/idempotency-keys/{long}")))
        .send()
        .await
        .unwrap();
    assert_problem(status, 400, "idempotency-key-malformed").await;
    assert_nothing_stored(&app).await;
}
