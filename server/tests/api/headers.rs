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

/// Pages run only the shop's scripts: the policy names a nonce made for this answer, and
/// every inline script of the page carries it (a script injected into a page would not).
#[tokio::test]
async fn every_inline_script_of_a_page_carries_the_nonce_its_policy_names() {
    let app = spawn_app().await;
    let mut nonces = Vec::new();
    for path in ["/", "/checkout", "/orders", "/no-such-page"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        let policy = header(&response, "content-security-policy").to_owned();
        assert!(policy.contains("'wasm-unsafe-eval'"), "{policy}");
        assert!(!policy.contains("'unsafe-eval'") && !policy.contains("'unsafe-inline'"));
        assert!(policy.contains("style-src 'self'"), "{policy}");
        let nonce = policy
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| panic!("{path}: no nonce in {policy}"))
            .to_owned();
        // Apart from its nonce, a page's policy is every other answer's.
        let without_nonce = policy.replace(&format!(" 'nonce-{nonce}'"), "");
        assert_eq!(without_nonce, server::headers::POLICY, "{path}");
        let html = response.text().await.unwrap();
        let scripts: Vec<&str> = html.split("<script").skip(1).collect();
        assert!(!scripts.is_empty(), "{path} has its hydration script");
        for script in scripts {
            let tag = &script[..script.find('>').unwrap()];
            assert!(
                tag.contains(&format!("nonce=\"{nonce}\"")),
                "{path}: <script{tag}> lacks the nonce {nonce}"
            );
        }
        nonces.push(nonce);
    }
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 4, "a fresh nonce for every answer");
}

/// An answer that is no page runs no inline script at all: its policy names no nonce, and
/// only the API reference (Swagger UI) may use inline styles.
#[tokio::test]
async fn answers_that_are_no_page_carry_the_policy_without_a_nonce() {
    let app = spawn_app().await;
    let order = post_order(&app.client, &app, Some("policy"), MUG_ORDER).await;
    let replay = post_order(&app.client, &app, Some("policy"), MUG_ORDER).await;
    let products = app
        .client
        .get(app.url("/api/products"))
        .send()
        .await
        .unwrap();
    for response in [&order, &replay, &products] {
        let policy = header(response, "content-security-policy");
        assert_eq!(policy, server::headers::POLICY, "{}", response.url());
        assert!(!policy.contains("nonce") && !policy.contains("'unsafe-inline'"));
    }
    let reference = app.client.get(app.url("/api/docs/")).send().await.unwrap();
    assert_eq!(
        header(&reference, "content-security-policy"),
        server::headers::REFERENCE_POLICY
    );
}

/// Every answer names its request (`x-request-id`, in the log's request span too): one the
/// client sent is kept, else the server makes one; a refusal of the rate limit, which comes
/// before the rest of the shop, names its request as well.
#[tokio::test]
async fn every_answer_names_its_request_a_rate_limit_refusal_too() {
    let app = spawn_app_with(|c| {
        c.limits.per_client = server::config::Rate {
            per_second: 1,
            burst: 1,
        };
    })
    .await;
    let sent = app
        .client
        .get(app.url("/api/products"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&sent, "x-request-id"), "trace-me-42");
    let made = app
        .client
        .get(app.url("/api/products"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        made.status(),
        429,
        "a second read at once, past a burst of one"
    );
    let id = header(&made, "x-request-id");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
}

/// Over HTTPS, the cookies travel over HTTPS only and the browser is told to use nothing
/// else; over plain HTTP (a developer's machine) neither, or nothing would work.
#[tokio::test]
async fn served_over_https_the_cookies_are_secure_and_hsts_is_sent() {
    let plain = spawn_app().await;
    let response = shopper()
        .get(plain.url("/api/session"))
        .send()
        .await
        .unwrap();
    assert!(response
        .headers()
        .get("strict-transport-security")
        .is_none());
    assert!(!header(&response, "set-cookie").contains("Secure"));

    let https = spawn_app_with(|c| c.served_over_https = true).await;
    let response = shopper()
        .get(https.url("/api/session"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&response, "strict-transport-security"),
        "max-age=31536000; includeSubDomains"
    );
    assert!(header(&response, "set-cookie").contains("Secure"));
    let login = shopper()
        .get(https.url("/operator/login"))
        .send()
        .await
        .unwrap();
    assert!(
        header(&login, "set-cookie").contains("Secure"),
        "the console's cookie"
    );
}
