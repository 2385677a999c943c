//! The checkout form without wasm: a native POST, the key in a hidden field, the same
//! executor as the API, and always a redirect.

use crate::helpers::*;

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
