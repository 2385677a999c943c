//! The shopper's side of the shop: an "Add to cart" that counts once per click, a cart
//! whose lines can be changed (each change a new checkout intent), refusals in plain words,
//! an order's status history, and a proper 404 page.

use futures::StreamExt;

use crate::helpers::*;

#[tokio::test]
async fn an_add_posted_twice_with_its_key_adds_once() {
    let app = spawn_app().await;
    app.open_session(&app.client).await;
    // A double click before hydration: the same form, with the same key, posted twice at once.
    let (first, second) = tokio::join!(
        app.add_to_cart_with_key(&app.client, "MUG-001", 2, "double-click"),
        app.add_to_cart_with_key(&app.client, "MUG-001", 2, "double-click"),
    );
    let ((), ()) = (first, second);
    app.add_to_cart_with_key(&app.client, "MUG-001", 2, "double-click")
        .await;
    assert_eq!(app.cart(&app.client).await["lines"][0]["quantity"], 2);

    app.add_to_cart_with_key(&app.client, "MUG-001", 1, "next-click")
        .await;
    assert_eq!(
        app.cart(&app.client).await["lines"][0]["quantity"],
        3,
        "a new key is a new add"
    );
}

#[tokio::test]
async fn changing_or_removing_a_line_starts_a_new_intent() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    app.add_to_cart(&app.client, "TEE-002", 1).await;
    let shown = page_key(&app, &app.client).await;

    app.set_cart_quantity(&app.client, "MUG-001", 1).await;
    let after_change = page_key(&app, &app.client).await;
    assert_ne!(after_change, shown, "a changed quantity is a new intent");
    app.set_cart_quantity(&app.client, "MUG-001", 1).await;
    assert_eq!(
        page_key(&app, &app.client).await,
        after_change,
        "setting the same quantity changes nothing"
    );
    assert_problem(checkout_api(&app, &shown).await, 422, "cart-changed").await;

    app.set_cart_quantity(&app.client, "TEE-002", 0).await;
    let after_remove = page_key(&app, &app.client).await;
    assert_ne!(after_remove, after_change, "a removed line is a new intent");
    let order: serde_json::Value = checkout_api(&app, &after_remove)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        order["items"],
        serde_json::json!([{"sku": "MUG-001", "name": "Stoneware mug", "quantity": 1, "unit_price_cents": 1800}])
    );
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn removing_the_last_line_empties_the_cart() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    app.set_cart_quantity(&app.client, "MUG-001", 0).await;
    assert_eq!(app.cart(&app.client).await["lines"], serde_json::json!([]));
    assert_eq!(
        app.count("carts").await,
        0,
        "an empty cart goes with its key"
    );
    app.set_cart_quantity(&app.client, "MUG-001", 0).await;
}

#[tokio::test]
async fn bad_cart_input_is_refused_with_a_422_and_changes_nothing() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let long_key = "k".repeat(256);
    let refusals: [(&str, Vec<(&str, &str)>); 9] = [
        (
            "set_cart_quantity",
            vec![("sku", "MUG-001"), ("quantity", "100")],
        ),
        (
            "set_cart_quantity",
            vec![("sku", "MUG-001"), ("quantity", "-1")],
        ),
        (
            "set_cart_quantity",
            vec![("sku", "TEE-002"), ("quantity", "1")],
        ),
        (
            "set_cart_quantity",
            vec![("sku", "MUG\u{0}"), ("quantity", "1")],
        ),
        (
            "add_to_cart",
            vec![("sku", "MUG-001"), ("quantity", "0"), ("add_key", "a")],
        ),
        (
            "add_to_cart",
            vec![
                ("sku", "MUG-001"),
                ("quantity", "4294967296"),
                ("add_key", "b"),
            ],
        ),
        (
            "add_to_cart",
            vec![("sku", "NOPE-404"), ("quantity", "1"), ("add_key", "c")],
        ),
        (
            "add_to_cart",
            vec![
                ("sku", "MUG-001"),
                ("quantity", "1"),
                ("add_key", &long_key),
            ],
        ),
        (
            "add_to_cart",
            vec![("sku", "MUG-001"), ("quantity", "1"), ("add_key", "nul\0")],
        ),
    ];
    for (function, form) in refusals {
        let refused = app.post_fn(&app.client, function, &form).await;
        assert_eq!(refused.status(), 422, "{function} {form:?}");
    }
    assert_eq!(app.cart(&app.client).await["lines"][0]["quantity"], 2);
    assert_eq!(
        page_key(&app, &app.client).await,
        key,
        "the cart's intent is untouched"
    );
}

#[tokio::test]
async fn an_out_of_stock_refusal_names_the_product_and_the_fixed_cart_orders() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    app.sql("UPDATE products SET stock = 1 WHERE sku = $1", "MUG-001")
        .await;
    let cart = app.cart(&app.client).await;
    assert_eq!(
        cart["lines"][0]["in_stock"], 1,
        "the cart shows what is left"
    );

    let refused = checkout_api(&app, &page_key(&app, &app.client).await).await;
    let problem = assert_problem(refused, 422, "out-of-stock").await;
    assert_eq!(
        problem["detail"],
        "Only 1 of Stoneware mug are in stock. Lower the quantity in your cart, then order again."
    );
    app.set_cart_quantity(&app.client, "MUG-001", 1).await;
    let placed = checkout_api(&app, &page_key(&app, &app.client).await).await;
    assert_eq!(placed.status(), 201);
}

#[tokio::test]
async fn an_order_shows_every_status_it_had_in_order() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let order: serde_json::Value = checkout_api(&app, &page_key(&app, &app.client).await)
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap().to_owned();
    assert_eq!(order["history"][0]["status"], "pending_payment");
    app.sql("UPDATE orders SET status = 'paid' WHERE id = $1::uuid", &id)
        .await;
    app.sql(
        "UPDATE orders SET updated_at = now() WHERE id = $1::uuid",
        &id,
    )
    .await;
    app.sql(
        "UPDATE orders SET status = 'fulfilled' WHERE id = $1::uuid",
        &id,
    )
    .await;

    let now = app
        .get_json(&app.client, &format!("/api/orders/{id}"))
        .await;
    let statuses: Vec<&str> = now["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["pending_payment", "paid", "fulfilled"],
        "an update that keeps the status adds nothing"
    );
    assert!(now["history"][2]["at"]
        .as_str()
        .unwrap()
        .ends_with("+00:00"));
}

#[tokio::test]
async fn an_unknown_page_is_a_404_page() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(app.url("/no-such-page"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let html = response.text().await.unwrap();
    assert!(html.contains("Page not found"), "{html}");
    assert!(
        html.contains("<title>Page not found · Once</title>"),
        "the page has its own title"
    );
}

/// Pages are rendered with streamed Suspense boundaries, and the rendering library can, rarely
/// and under load, stall a response's body for good (leptos-rs/leptos#4851). Many page loads
/// at once must all complete.
#[tokio::test]
async fn many_page_loads_at_once_all_complete() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let client = reqwest::Client::builder()
        .cookie_store(true)
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    app.open_session(&client).await;
    add_mugs(&app, &client).await;
    let loads = (0..400).map(|i| {
        let (client, url) = (
            client.clone(),
            app.url(["/checkout", "/", "/orders"][i % 3]),
        );
        async move {
            let response = client.get(url).send().await?;
            response.text().await
        }
    });
    let pages: Vec<_> = futures::stream::iter(loads)
        .buffer_unordered(16)
        .collect()
        .await;
    let stalled = pages.iter().filter(|p| p.is_err()).count();
    assert_eq!(stalled, 0, "page loads that never completed");
    assert!(pages
        .iter()
        .all(|p| p.as_ref().unwrap().contains("</html>")));
}
