//! Input that once made the shop answer 500 (issue "hostile traffic"): each is now a 4xx
//! that says why, problem+json for programs and a page for a browser, and nothing stored.

use crate::helpers::*;

async fn assert_nothing_stored(app: &TestApp) {
    for table in [
        "orders",
        "idempotency_keys",
        "cart_adds",
        "payment_callbacks",
    ] {
        assert_eq!(app.count(table).await, 0, "{table}");
    }
}

#[tokio::test]
async fn a_nul_in_a_sku_is_refused_before_the_key_is_claimed_every_time() {
    let app = spawn_app().await;
    let body = r#"{"items":[{"sku":"MUG\u0000-001","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    for _ in 0..2 {
        let response = post_order(&app.client, &app, Some("nul-sku"), body).await;
        assert_problem(response, 422, "unknown-sku").await;
    }
    assert_nothing_stored(&app).await;
}

#[tokio::test]
async fn a_signed_callback_with_a_nul_is_refused_and_not_recorded() {
    let app = spawn_app().await;
    let now = chrono::Utc::now().timestamp();
    let bodies = [
        serde_json::json!({"id": "evt_1", "type": "charge.succeeded", "tx_no": "tx\u{0}1", "data": {}}),
        serde_json::json!({"id": "evt_2", "type": "charge\u{0}", "tx_no": "tx_2", "data": {}}),
        serde_json::json!({"id": "evt_3", "type": "x", "tx_no": "tx_3", "data": {"k\u{0}": ["\u{0}"]}}),
    ];
    for body in &bodies {
        let response = signed_callback(&app, body, TEST_WEBHOOK_SECRET, now)
            .send()
            .await
            .unwrap();
        assert_problem(response, 400, "invalid-callback").await;
    }
    assert_nothing_stored(&app).await;
}

/// Every server function, with arguments it cannot read: each a 400 `invalid-arguments`.
#[tokio::test]
async fn server_functions_refuse_arguments_they_cannot_read() {
    let app = spawn_app().await;
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("add_to_cart", &[("sku", "MUG-001"), ("quantity", "1")]),
        (
            "add_to_cart",
            &[("sku", "MUG-001"), ("quantity", "lots"), ("add_key", "k")],
        ),
        ("set_cart_quantity", &[("sku", "MUG-001")]),
        ("get_order", &[]),
        ("get_order_progress", &[("nothing", "here")]),
    ];
    for (name, form) in cases {
        let response = app.post_fn(&app.client, name, form).await;
        let body = assert_problem(response, 400, "invalid-arguments").await;
        assert!(
            body["detail"].as_str().unwrap().contains("arguments"),
            "{body}"
        );
    }
    assert_nothing_stored(&app).await;
}

#[tokio::test]
async fn server_functions_refuse_oversize_and_non_utf8_bodies() {
    let app = spawn_app().await;
    let post = |body: Vec<u8>| {
        app.client
            .post(app.url("/_fn/add_to_cart"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let huge = format!("sku={}&quantity=1&add_key=k", "A".repeat(70 * 1024));
    assert_problem(
        post(huge.into_bytes()).await.unwrap(),
        413,
        "payload-too-large",
    )
    .await;
    let not_utf8 = b"sku=MUG-001&quantity=1&add_key=\xff\xfe".to_vec();
    assert_problem(post(not_utf8).await.unwrap(), 400, "invalid-arguments").await;
    assert_nothing_stored(&app).await;
}

/// Reads by a caller without a session (or with one the store forgot) are answered, empty.
#[tokio::test]
async fn reads_without_a_live_session_answer_empty() {
    let app = spawn_app().await;
    let stranger = reqwest::Client::new();
    let forgotten = "once_session=AAAAAAAAAAAAAAAAAAAAAA";
    for cookie in [None, Some(forgotten)] {
        for (name, form) in [
            ("list_orders", vec![]),
            ("get_order", vec![("id", uuid::Uuid::new_v4().to_string())]),
            ("get_order_progress", vec![("id", "not-a-uuid".to_owned())]),
            ("get_cart", vec![]),
        ] {
            let mut request = stranger.post(app.url(&format!("/_fn/{name}"))).form(&form);
            if let Some(cookie) = cookie {
                request = request.header("cookie", cookie);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200, "{name} with {cookie:?}");
        }
    }
}

/// What axum itself refuses (a path that does not decode, a query or form that does not
/// parse) comes out as the shop's own refusals, not as `text/plain`.
#[tokio::test]
async fn framework_refusals_are_problems_for_programs_and_pages_for_browsers() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(app.url("/api/orders/%FF"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    let status = response.status().as_u16();
    assert_problem(response, status, "bad-request").await;

    let page = app
        .client
        .get(app.url("/api/orders/%FF"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert!(page.status().is_client_error());
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(page.text().await.unwrap().contains("Nothing was changed"));

    let wrong_method = app
        .client
        .delete(app.url("/api/products"))
        .send()
        .await
        .unwrap();
    assert_problem(wrong_method, 405, "method-not-allowed").await;
}

/// A checkout form that the shop did not render is sent back to the checkout with words,
/// not answered with axum's plain-text refusal.
#[tokio::test]
async fn a_malformed_checkout_form_goes_back_to_the_checkout() {
    let app = spawn_app().await;
    for (content_type, body) in [
        ("application/x-www-form-urlencoded", "nothing=here"),
        ("text/plain", "idempotency_key=k"),
    ] {
        let response = app
            .client
            .post(app.url("/checkout"))
            .header("content-type", content_type)
            .header("accept", "text/html")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{content_type}");
        assert_eq!(
            response.headers()["location"],
            "/checkout?problem=form-incomplete"
        );
    }
    assert_nothing_stored(&app).await;
}
