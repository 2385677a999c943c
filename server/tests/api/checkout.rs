//! The checkout form without wasm: a native POST, the key in a hidden field, the same
//! executor as the API, and always a redirect.

use sqlx::Connection;

use crate::helpers::*;

async fn add_mugs(app: &TestApp, client: &reqwest::Client) {
    app.add_to_cart(client, "MUG-001", 2).await;
}

fn form_request(
    app: &TestApp,
    client: &reqwest::Client,
    key: &str,
    held_at: Option<&str>,
) -> reqwest::RequestBuilder {
    let request = client
        .post(app.url("/checkout"))
        .form(&[("idempotency_key", key)]);
    match held_at {
        Some(gate) => request.header("once-test-hold", gate),
        None => request,
    }
}

async fn submit_form(
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
fn spawn_form(
    app: &TestApp,
    key: &str,
    held_at: Option<&str>,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let request = form_request(app, &app.client, key, held_at);
    tokio::spawn(async move { request.send().await.unwrap() })
}

fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 303, "a redirect, never an error page");
    response.headers()["location"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_checkout_page_renders_the_cart_and_its_key() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let html = app.get_text(&app.client, "/checkout").await;
    assert!(
        html.contains("Stoneware mug") && html.contains("€36.00"),
        "the cart, priced by the server"
    );
    assert!(html.contains(r#"name="idempotency_key""#) && html.contains("Place order"));
    let key = page_key(&app, &app.client).await;
    assert_eq!(
        page_key(&app, &app.client).await,
        key,
        "every render of the same cart carries the same intent"
    );
    let other_tab = shopper();
    app.open_session(&other_tab).await;
    add_mugs(&app, &other_tab).await;
    assert_ne!(
        page_key(&app, &other_tab).await,
        key,
        "another shopper's cart, another key"
    );
}

#[tokio::test]
async fn a_native_submit_creates_the_order_and_redirects_to_it() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let response = submit_form(&app, &app.client, &key, None).await;
    let page = location(&response);
    assert!(page.starts_with("/orders/"), "{page}");
    assert_eq!(app.count("orders").await, 1);

    let html = app.get_text(&app.client, &page).await;
    assert!(
        html.contains("ONC-") && html.contains("Pending payment"),
        "the order page shows number and status"
    );
    let cart = app.cart(&app.client).await;
    assert_eq!(
        cart["lines"].as_array().unwrap().len(),
        0,
        "the cart is empty after ordering"
    );

    // The same submit again (a reload that re-posts): the same order.
    let again = submit_form(&app, &app.client, &key, None).await;
    assert_eq!(location(&again), page);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_repeat_while_the_first_is_processing_waits_and_redirects_to_the_same_order() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let first = spawn_form(&app, &key, Some("form"));
    app.wait_until_held("form", 1).await;
    let second = spawn_form(&app, &key, None);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    app.open_gate("form").await;
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(location(&first), location(&second));
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_native_submit_with_an_empty_cart_goes_back_to_the_checkout() {
    let app = spawn_app().await;
    let response = submit_form(&app, &app.client, "form-3", None).await;
    assert!(location(&response).starts_with("/checkout?problem="));
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);
}

#[tokio::test]
async fn my_orders_lists_only_this_sessions_orders() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let page = location(&submit_form(&app, &app.client, &key, None).await);
    let html = app.get_text(&app.client, "/orders").await;
    assert!(html.contains(&page), "my order is linked");

    let stranger = shopper();
    let theirs = app.get_text(&stranger, "/orders").await;
    assert!(!theirs.contains(&page) && theirs.contains("No orders yet"));
    let their_view = app.get_text(&stranger, &page).await;
    assert!(their_view.contains("There is no such order"));
}

/// The key the checkout page's form carries.
async fn page_key(app: &TestApp, client: &reqwest::Client) -> String {
    key_in(&app.get_text(client, "/checkout").await)
}

/// The key in a checkout page's HTML.
fn key_in(html: &str) -> String {
    let field = html
        .find(r#"name="idempotency_key""#)
        .expect("the form's key field");
    let rest = &html[field..];
    let value = rest.find(r#"value=""#).expect("a value") + r#"value=""#.len();
    rest[value..][..rest[value..].find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn the_form_and_the_api_are_one_operation_for_one_key() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let order_page = location(&submit_form(&app, &app.client, &key, None).await);
    // The hydrated page (or a client) sends the same intent through the API.
    let api = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_eq!(api.status(), 201, "a replay, not a 422");
    assert_eq!(api.headers()["idempotent-replayed"], "true");
    let api_location = api.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(format!("/api{order_page}"), api_location);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn the_cart_keeps_its_key_until_the_order_and_the_order_empties_it() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    assert_eq!(
        page_key(&app, &app.client).await,
        key,
        "a reload shows the same key"
    );

    // A transient failure after the order's writes: everything rolls back, the cart too.
    let failed = form_request(&app, &app.client, &key, None)
        .header("once-test-fail", "transient")
        .send()
        .await
        .unwrap();
    assert!(location(&failed).starts_with("/checkout?problem="));
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.cart(&app.client).await["lines"][0]["quantity"], 2);
    assert_eq!(
        page_key(&app, &app.client).await,
        key,
        "the checkout shows the same key: the next click resumes this intent"
    );

    let placed = location(&submit_form(&app, &app.client, &key, None).await);
    assert!(placed.starts_with("/orders/"));
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(
        app.cart(&app.client).await["lines"],
        serde_json::json!([]),
        "the order's transaction emptied the cart"
    );
    add_mugs(&app, &app.client).await;
    assert_ne!(
        page_key(&app, &app.client).await,
        key,
        "the intent ended with the order"
    );
}

#[tokio::test]
async fn an_api_order_empties_the_cart_in_its_own_transaction() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let failed = post_order_with(
        &app.client,
        &app,
        Some("api-cart"),
        MUG_ORDER,
        &[("once-test-fail", "transient")],
    )
    .await;
    assert_eq!(failed.status(), 503);
    assert_eq!(
        app.count("cart_lines").await,
        1,
        "rolled back with the order"
    );
    let placed = post_order(&app.client, &app, Some("api-cart"), MUG_ORDER).await;
    assert_eq!(placed.status(), 201);
    assert_eq!(app.count("cart_lines").await, 0);
    assert_eq!(app.count("carts").await, 0);
}

#[tokio::test]
async fn a_refusal_ends_the_intent_and_a_changed_cart_gets_a_new_key() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    app.sql("UPDATE products SET stock = 1 WHERE sku = $1", "MUG-001")
        .await;
    let refused = location(&submit_form(&app, &app.client, &key, None).await);
    assert!(refused.contains("in%20stock"), "{refused}");
    let next = page_key(&app, &app.client).await;
    assert_ne!(next, key, "the refusal ended the intent");

    app.add_to_cart(&app.client, "TEE-002", 1).await;
    assert_ne!(
        page_key(&app, &app.client).await,
        next,
        "a changed cart is a new intent"
    );
    app.sql("UPDATE products SET stock = 50 WHERE sku = $1", "MUG-001")
        .await;
    let key = page_key(&app, &app.client).await;
    assert!(location(&submit_form(&app, &app.client, &key, None).await).starts_with("/orders/"));
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn what_another_tab_added_meanwhile_stays_in_the_cart() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    // The order names the two mugs it was placed for; a tee and a third mug came later.
    app.add_to_cart(&app.client, "TEE-002", 1).await;
    app.add_to_cart(&app.client, "MUG-001", 1).await;
    let placed = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_eq!(placed.status(), 201);
    let cart = app.cart(&app.client).await;
    let lines: Vec<(String, u64)> = cart["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["sku"].as_str().unwrap().to_owned(),
                l["quantity"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [("MUG-001".to_owned(), 1), ("TEE-002".to_owned(), 1)]
    );
    assert_ne!(page_key(&app, &app.client).await, key);
}

/// `POST /api/checkout` under `key`, as the hydrated checkout page sends it.
async fn checkout_api(app: &TestApp, key: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/checkout"))
        .header("idempotency-key", key)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_page_showing_an_older_cart_cannot_order_it() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let tab_a = page_key(&app, &app.client).await;
    // Tab B adds a tee: the cart is another intent now.
    app.add_to_cart(&app.client, "TEE-002", 1).await;
    let tab_b = page_key(&app, &app.client).await;

    let stale = checkout_api(&app, &tab_a).await;
    assert_problem(stale, 422, "cart-changed").await;
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0, "nothing stored");

    let placed = checkout_api(&app, &tab_b).await;
    assert_eq!(placed.status(), 201);
    let order: serde_json::Value = placed.json().await.unwrap();
    assert_eq!(
        order["items"].as_array().unwrap().len(),
        2,
        "the cart as the server holds it"
    );
    // Both tabs again, after the order: a replay and a refusal, never a second order.
    let replay = checkout_api(&app, &tab_b).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_problem(checkout_api(&app, &tab_a).await, 422, "cart-changed").await;
    let form = submit_form(&app, &app.client, &tab_a, None).await;
    assert!(location(&form).starts_with("/checkout?problem="));
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_cart_changed_while_its_checkout_runs_is_not_ordered_twice() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let tab_a = page_key(&app, &app.client).await;
    // Orders stall (a slow insert): tab A's checkout is inside its transaction.
    let mut stall = sqlx::PgConnection::connect(&app.config.database_url)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut stall).await.unwrap();
    sqlx::query("LOCK TABLE orders IN EXCLUSIVE MODE")
        .execute(&mut stall)
        .await
        .unwrap();
    let first = {
        let request = app
            .client
            .post(app.url("/api/checkout"))
            .header("idempotency-key", tab_a.as_str())
            .json(&serde_json::json!({}));
        tokio::spawn(async move { request.send().await.unwrap() })
    };
    app.wait_for_lock_waiters(1, "tab A waits on the stalled insert")
        .await;
    // Tab B adds a mug and checks out the cart it is shown, under the key it is shown,
    // while tab A's order is still being written.
    let tab_b = {
        let (base, client) = (app.address.clone(), app.client.clone());
        tokio::spawn(async move {
            let added = client
                .post(format!("{base}/_fn/add_to_cart"))
                .form(&[("sku", "MUG-001"), ("quantity", "1")])
                .send()
                .await
                .unwrap();
            assert!(added.status().is_success());
            let page = client.get(format!("{base}/checkout")).send().await.unwrap();
            let key = key_in(&page.text().await.unwrap());
            client
                .post(format!("{base}/api/checkout"))
                .header("idempotency-key", key)
                .json(&serde_json::json!({}))
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    sqlx::query("COMMIT").execute(&mut stall).await.unwrap();
    assert_eq!(first.await.unwrap().status(), 201);
    assert_eq!(
        tab_b.await.unwrap(),
        201,
        "tab B orders what it added after A's order"
    );

    let mugs: i64 =
        sqlx::query_scalar("SELECT sum(quantity)::bigint FROM order_items WHERE sku = 'MUG-001'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        mugs, 3,
        "two mugs, then one more: never more than were put in the cart"
    );
}

#[tokio::test]
async fn a_key_used_for_another_operation_is_not_replayed_as_an_order() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    assert_eq!(
        pay(&app, &order_id, "pay-key-1", "4242424242424242", &[])
            .await
            .status(),
        201
    );
    add_mugs(&app, &app.client).await;
    assert_problem(
        checkout_api(&app, "pay-key-1").await,
        422,
        "idempotency-key-reused",
    )
    .await;
    assert_eq!(app.count("orders").await, 1);
}
