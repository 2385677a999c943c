//! Every kind of answer carries the headers a checkout needs: not framed by other sites, no
//! content-type guessing, no Referer to other sites, and nothing personal kept by a cache.

use crate::helpers::*;

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{} has no {name}", response.url()))
}

fn assert_protected(response: &reqwest::Response) {
    assert_eq!(header(response, "x-content-type-options"), "nosniff");
    assert_eq!(header(response, "x-frame-options"), "DENY");
    assert_eq!(header(response, "referrer-policy"), "same-origin");
    let policy = header(response, "content-security-policy");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(policy.contains("form-action 'self'"), "{policy}");
    assert!(policy.contains("base-uri 'self'") && policy.contains("object-src 'none'"));
}

#[tokio::test]
async fn pages_api_answers_and_refusals_carry_the_headers_and_are_never_cached() {
    let app = spawn_app_with(|c| c.operator_password = Some("operator-password".into())).await;
    let order = post_order(&app.client, &app, Some("headers"), MUG_ORDER).await;
    let order: serde_json::Value = order.json().await.unwrap();
    let order_page = format!("/orders/{}", order["id"].as_str().unwrap());
    for path in [
        "/",
        "/checkout",
        "/orders",
        order_page.as_str(),
        "/no-such-page",
        "/api/products",
        "/api/orders",
        "/api/orders/not-an-id",
        "/operator/login",
        "/healthz",
    ] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_protected(&response);
        assert_eq!(
            header(&response, "cache-control"),
            "private, no-store",
            "{path}"
        );
    }
    // A write's answer and a refusal too, replay included.
    for _ in 0..2 {
        let placed = post_order(&app.client, &app, Some("headers-2"), MUG_ORDER).await;
        assert_protected(&placed);
        assert_eq!(header(&placed, "cache-control"), "private, no-store");
    }
    let refused = post_order(&app.client, &app, None, MUG_ORDER).await;
    assert_protected(&refused);
    // A miss under the built site's folder is the app's 404 page: not cached either.
    let missing = app
        .client
        .get(app.url("/pkg/no-such-file.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_protected(&missing);
    assert_eq!(header(&missing, "cache-control"), "private, no-store");
}
