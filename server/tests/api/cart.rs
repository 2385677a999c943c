//! The cart and its checkout key: one key per cart until the intent ends, the order's own
//! transaction takes its lines, and only the cart's current key can order it.

use sqlx::Connection;

use crate::helpers::*;

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
    // The reason travels as a code: the page shows the shop's own words for it.
    assert_eq!(refused, "/checkout?problem=out-of-stock");
    let page = app.get_text(&app.client, &refused).await;
    assert!(
        page.contains("not in stock in the quantity you chose"),
        "{page}"
    );
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
            .json(&details());
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
                .form(&[
                    ("sku", "MUG-001"),
                    ("quantity", "1"),
                    ("add_key", "tab-b-add"),
                ])
                .send()
                .await
                .unwrap();
            assert!(added.status().is_success());
            let page = client.get(format!("{base}/checkout")).send().await.unwrap();
            let key = key_in(&page.text().await.unwrap());
            client
                .post(format!("{base}/api/checkout"))
                .header("idempotency-key", key)
                .json(&details())
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
