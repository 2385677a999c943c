//! A page on another site cannot act for a shopper: no POST opens a session or sets the
//! session cookie (an empty session would replace the shopper's), every write a browser
//! sends from another origin is refused before it acts, redirects stay on the shop, and
//! the operator's session is no shop session.

use reqwest::header::{ACCEPT, COOKIE, SET_COOKIE};

use crate::helpers::*;

/// Every state-changing endpoint of the shop, as (path, form or JSON body).
const WRITES: &[(&str, &str)] = &[
    (
        "/_fn/add_to_cart",
        "sku=MUG-001&quantity=5&add_key=from-elsewhere",
    ),
    ("/_fn/set_cart_quantity", "sku=TEA-006&quantity=0"),
    ("/_fn/get_cart", ""),
    ("/_fn/get_checkout", ""),
    ("/checkout", "idempotency_key=from-elsewhere"),
];

async fn stored_sessions(app: &TestApp) -> i64 {
    app.count("tower_sessions.session").await
}

fn sets_session_cookie(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .any(|c| c.as_bytes().starts_with(b"once_session="))
}

#[tokio::test]
async fn no_post_opens_a_session_or_sets_its_cookie() {
    let app = spawn_app().await;
    let sessions = stored_sessions(&app).await;
    // A browser on another site's page sends no cookie (SameSite=Lax) and no fetch headers
    // here: this is what arrives when the origin check cannot tell.
    let stranger = shopper();
    for (path, form) in WRITES {
        let response = stranger
            .post(app.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(*form)
            .send()
            .await
            .unwrap();
        assert!(
            !sets_session_cookie(&response),
            "{path} set a session cookie"
        );
        assert!(
            response.status().as_u16() < 500,
            "{path}: {}",
            response.status()
        );
    }
    let order = post_order(&stranger, &app, Some("k"), MUG_ORDER).await;
    assert!(!sets_session_cookie(&order));
    // Nor a preflight, nor a method the shop refuses.
    for method in ["OPTIONS", "TRACE"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = stranger
            .request(method.clone(), app.url("/_fn/add_to_cart"))
            .send()
            .await
            .unwrap();
        assert!(!sets_session_cookie(&response), "{method}");
    }
    assert_eq!(stored_sessions(&app).await, sessions, "no session opened");
    assert_eq!(app.count("cart_lines").await, 0);
    assert_eq!(app.count("carts").await, 0);
}

/// The shopper's cart and cookie before an attack, to compare with after it.
async fn shopper_with_a_cart(app: &TestApp) -> String {
    app.add_to_cart(&app.client, "TEA-006", 2).await;
    serde_json::to_string(&app.cart(&app.client).await).unwrap()
}

#[tokio::test]
async fn a_write_another_site_sends_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let cart = shopper_with_a_cart(&app).await;
    let keys = app.count("idempotency_keys").await;
    // What browsers send with a request from another site's page: Sec-Fetch-Site, or (older
    // browsers) an Origin that is not the shop's.
    let senders: [&[(&str, &str)]; 3] = [
        &[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://127.0.0.2:9000"),
        ],
        &[
            ("sec-fetch-site", "same-site"),
            ("origin", "http://127.0.0.1:9000"),
        ],
        &[("origin", "http://elsewhere.test")],
    ];
    for headers in senders {
        for (path, form) in WRITES {
            let mut request = app
                .client
                .post(app.url(path))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(*form);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let response = request.send().await.unwrap();
            assert!(!sets_session_cookie(&response), "{path}");
            assert_problem(response, 403, "cross-site-request").await;
        }
        let mut order = app
            .client
            .post(app.url("/api/orders"))
            .header("content-type", "application/json")
            .header("idempotency-key", "cross-site-order")
            .body(MUG_ORDER);
        for (name, value) in headers {
            order = order.header(*name, *value);
        }
        assert_problem(order.send().await.unwrap(), 403, "cross-site-request").await;
    }
    assert_eq!(
        serde_json::to_string(&app.cart(&app.client).await).unwrap(),
        cart
    );
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, keys);
}

#[tokio::test]
async fn a_form_another_site_posts_gets_a_plain_page_saying_so() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/checkout"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(ACCEPT, "text/html,application/xhtml+xml")
        .header("sec-fetch-site", "cross-site")
        .body("idempotency_key=from-elsewhere")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = response.text().await.unwrap();
    assert!(page.contains("did not come from the shop"), "{page}");
}

#[tokio::test]
async fn the_shops_own_pages_still_write() {
    let app = spawn_app().await;
    let own = app.address.trim_start_matches("http://").to_owned();
    let added = app
        .client
        .post(app.url("/_fn/add_to_cart"))
        .header("sec-fetch-site", "same-origin")
        .header("origin", format!("http://{own}"))
        .form(&[
            ("sku", "MUG-001"),
            ("quantity", "1"),
            ("add_key", "own-page"),
        ])
        .send()
        .await
        .unwrap();
    assert!(added.status().is_success(), "{}", added.status());
    // An older browser: no Sec-Fetch-Site, the shop's own Origin.
    let order = post_order_with(
        &app.client,
        &app,
        Some("own-origin"),
        MUG_ORDER,
        &[("origin", &format!("http://{own}"))],
    )
    .await;
    assert_eq!(order.status(), 201);
}

#[tokio::test]
async fn a_form_is_never_redirected_off_the_shop() {
    let app = spawn_app().await;
    for referer in [
        "http://elsewhere.test/phish",
        "javascript:alert(document.cookie)",
        "//elsewhere.test/",
    ] {
        let response = app
            .client
            .post(app.url("/_fn/add_to_cart"))
            .header(ACCEPT, "text/html")
            .header("referer", referer)
            .form(&[("sku", "MUG-001"), ("quantity", "1"), ("add_key", referer)])
            .send()
            .await
            .unwrap();
        assert!(response.status().is_redirection(), "{}", response.status());
        assert_eq!(
            response.headers()["location"],
            "/",
            "for a Referer {referer}"
        );
    }
    // The shop's own page is where the form goes back to.
    let own = app.url("/checkout");
    let response = app
        .client
        .post(app.url("/_fn/add_to_cart"))
        .header(ACCEPT, "text/html")
        .header("referer", &own)
        .form(&[("sku", "MUG-001"), ("quantity", "1"), ("add_key", "own")])
        .send()
        .await
        .unwrap();
    let back = response.headers()["location"].to_str().unwrap();
    assert!(back.starts_with("/checkout"), "{back}");
}

#[tokio::test]
async fn the_checkout_shows_only_words_the_shop_issued() {
    let app = spawn_app().await;
    let forged = "Your card was blocked. Call +1 555 0100 now";
    let page = app
        .get_text(
            &app.client,
            &format!("/checkout?problem={}", app::query::encode(forged)),
        )
        .await;
    assert!(
        !page.contains("Call +1 555 0100"),
        "a forged problem is shown"
    );
    let page = app
        .get_text(&app.client, "/checkout?problem=out-of-stock")
        .await;
    assert!(page.contains(app::messages::text("out-of-stock").unwrap()));
    // A no-wasm form's error travels as `__err`: a forged one shows no words of its own.
    let forged_error: leptos::prelude::ServerFnError =
        leptos::prelude::ServerFnError::ServerError(forged.into());
    let error = leptos::server_fn::error::ServerFnUrlError::new("/_fn/add_to_cart", forged_error);
    let url = error.to_url(&app.url("/checkout")).unwrap();
    let page = app
        .get_text(&app.client, &format!("/checkout?{}", url.query().unwrap()))
        .await;
    assert!(
        !page.contains("Call +1 555 0100"),
        "a forged __err is shown"
    );
}

#[tokio::test]
async fn an_operator_session_is_no_shop_session() {
    let app = spawn_app_with(|c| c.operator_password = Some("operator-password".into())).await;
    let operator = shopper();
    let logged_in = crate::operator::login(&app, &operator, "operator-password").await;
    assert_eq!(logged_in.status(), 303);
    let cookie = logged_in
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|c| c.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("once_operator="))
        .expect("an operator session");
    let id = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("once_operator=");
    let order = reqwest::Client::new()
        .post(app.url("/api/orders"))
        .header(COOKIE, format!("once_session={id}"))
        .header("content-type", "application/json")
        .header("idempotency-key", "operator-as-shopper")
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    assert_problem(order, 400, "session-required").await;
    assert_eq!(app.count("orders").await, 0);
}
