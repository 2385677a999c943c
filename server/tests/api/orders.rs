//! Orders under load and across sessions.

use std::collections::HashSet;

use crate::helpers::*;

#[tokio::test]
async fn fifty_concurrent_requests_with_one_key_make_exactly_one_order() {
    let app = spawn_app().await;
    let requests = (0..50).map(|_| {
        let (client, address) = (app.client.clone(), app.address.clone());
        tokio::spawn(async move {
            let response = client
                .post(format!("{address}/api/orders"))
                .header("content-type", "application/json")
                .header("idempotency-key", "storm-1")
                .body(MUG_ORDER)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, retry_after, response.bytes().await.unwrap())
        })
    });
    let mut created_bodies = HashSet::new();
    let (mut created, mut in_progress) = (0, 0);
    for request in requests.collect::<Vec<_>>() {
        let (status, retry_after, body) = request.await.unwrap();
        match status {
            201 => {
                created += 1;
                created_bodies.insert(body);
            }
            409 => {
                in_progress += 1;
                assert!(retry_after.is_some(), "a 409 says when to retry");
            }
            other => panic!(
                "unexpected status {other}: {}",
                String::from_utf8_lossy(&body)
            ),
        }
    }
    assert!(created >= 1);
    assert_eq!(created + in_progress, 50);
    assert_eq!(
        created_bodies.len(),
        1,
        "every 201 is the identical response"
    );
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("outbox_events").await, 1);
    assert_eq!(app.metric("once_idempotency_executions_total").await, 1);
}

#[tokio::test]
async fn mixed_keys_and_payloads_under_load_keep_one_order_per_key() {
    let app = spawn_app().await;
    let bodies = [
        MUG_ORDER,
        r#"{"items":[{"sku":"TEE-002","quantity":1},{"sku":"NOTE-003","quantity":3}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
        r#"{"items":[{"sku":"NOPE","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
    ];
    let requests: Vec<_> = (0..60)
        .map(|i| {
            let (client, address) = (app.client.clone(), app.address.clone());
            let (key, body) = (format!("mix-{}", i % 10), bodies[(i % 10) % 3]);
            tokio::spawn(async move {
                client
                    .post(format!("{address}/api/orders"))
                    .header("content-type", "application/json")
                    .header("idempotency-key", key)
                    .body(body)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    for request in requests {
        let status = request.await.unwrap();
        assert!(
            [201, 409, 422].contains(&status),
            "no 5xx under load, got {status}"
        );
    }
    // Keys 0..10 map to bodies by key % 3: 4 mugs, 3 tee+notebook, 3 unknown skus.
    assert_eq!(app.count("orders").await, 7);
    assert_eq!(app.count("outbox_events").await, 7);
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders o WHERE total_cents IS DISTINCT FROM (SELECT sum(quantity * unit_price_cents) FROM order_items WHERE order_id = o.id)",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(orphans, 0, "every total matches its lines");
}

#[tokio::test]
async fn another_session_with_the_same_key_is_a_different_request() {
    let app = spawn_app().await;
    let mine = post_order(&app.client, &app, Some("shared-key"), MUG_ORDER).await;
    let my_location = mine.headers()["location"].to_str().unwrap().to_owned();

    let stranger = shopper();
    app.open_session(&stranger).await;
    let theirs = post_order(&stranger, &app, Some("shared-key"), MUG_ORDER).await;
    assert_eq!(theirs.status(), 201);
    assert!(
        theirs.headers().get("idempotent-replayed").is_none(),
        "never someone else's response"
    );
    assert_ne!(theirs.headers()["location"].to_str().unwrap(), my_location);
    assert_eq!(app.count("orders").await, 2);

    let their_view = stranger.get(app.url(&my_location)).send().await.unwrap();
    assert_problem(their_view, 404, "not-found").await;
    // The stranger's own key is theirs; they cannot see the state of mine.
    let my_key_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idempotency_keys WHERE key = 'shared-key'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(my_key_rows, 2);
    let status: serde_json::Value = app
        .get_json(&stranger, "/api/idempotency-keys/shared-key")
        .await;
    assert_ne!(status["location"].as_str().unwrap(), my_location);
    let unknown = stranger
        .get(app.url("/api/idempotency-keys/only-mine"))
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "not-found").await;
    post_order(&app.client, &app, Some("only-mine"), MUG_ORDER).await;
    let still_unknown = stranger
        .get(app.url("/api/idempotency-keys/only-mine"))
        .send()
        .await
        .unwrap();
    assert_problem(still_unknown, 404, "not-found").await;
}

#[tokio::test]
async fn orders_are_listed_newest_first_and_shown_by_id() {
    let app = spawn_app().await;
    post_order(&app.client, &app, Some("list-1"), MUG_ORDER).await;
    let second: serde_json::Value = post_order(
        &app.client,
        &app,
        Some("list-2"),
        r#"{"items":[{"sku":"TEE-002","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
    )
    .await
    .json()
    .await
    .unwrap();

    let list = app.get_json(&app.client, "/api/orders").await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], second["id"], "newest first");
    assert!(list[0]["order_no"].as_str().unwrap().starts_with("ONC-"));

    let shown: serde_json::Value = app
        .client
        .get(app.url(&format!("/api/orders/{}", second["id"].as_str().unwrap())))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown, second);
    assert_eq!(shown["items"][0]["name"], "Organic cotton tee");
    assert_eq!(shown["items"][0]["unit_price_cents"], 2900);
    assert_eq!(shown["currency"], "EUR");

    let not_an_id = app
        .client
        .get(app.url("/api/orders/not-a-uuid"))
        .send()
        .await
        .unwrap();
    assert_problem(not_an_id, 404, "not-found").await;
}

#[tokio::test]
async fn the_order_number_is_unique_by_constraint() {
    let app = spawn_app().await;
    let order: serde_json::Value = post_order(&app.client, &app, Some("no-1"), MUG_ORDER)
        .await
        .json()
        .await
        .unwrap();
    let duplicate = sqlx::query(
        "INSERT INTO orders (id, order_no, session_id, currency, total_cents) VALUES (gen_random_uuid(), $1, 's', 'EUR', 1)",
    )
    .bind(order["order_no"].as_str().unwrap())
    .execute(&app.db)
    .await
    .unwrap_err();
    assert_eq!(
        duplicate.as_database_error().unwrap().constraint(),
        Some("orders_order_no_key")
    );
}

#[tokio::test]
async fn two_server_instances_on_one_database_still_make_one_order_per_key() {
    let a = spawn_app().await;
    let b = start(a.config.clone(), a.db_name.clone()).await;
    // One shopper (one cookie jar) whose requests are spread over both instances.
    let requests: Vec<_> = (0..40)
        .map(|i| {
            let address = if i % 2 == 0 {
                a.address.clone()
            } else {
                b.address.clone()
            };
            let request = a
                .client
                .post(format!("{address}/api/orders"))
                .header("content-type", "application/json")
                .header("idempotency-key", "two-instances")
                .body(MUG_ORDER);
            tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
        })
        .collect();
    for request in requests {
        let status = request.await.unwrap();
        assert!(status == 201 || status == 409, "got {status}");
    }
    assert_eq!(
        a.count("orders").await,
        1,
        "the database, not process memory, decides"
    );
    assert_eq!(a.count("outbox_events").await, 1);
}
