//! The shopper's details (email, shipping address): checked before anything is stored, part
//! of the intent a checkout key fingerprints, carried to the order, its email and nowhere
//! else, and forgotten with the order's retention (docs/protocol.md, "The shopper's details").

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::helpers::*;

/// Ada's details with another street: the same shopper fixing a typo.
fn fixed_details() -> serde_json::Value {
    let mut details = details();
    details["shipping_address"]["line1"] = json!("2 Main Street");
    details
}

/// Statements on this test's own database.
async fn run(app: &TestApp, sql: &str) {
    sqlx::raw_sql(sql).execute(&app.db).await.expect(sql);
}

async fn nothing_stored(app: &TestApp) {
    assert_eq!(app.count("idempotency_keys").await, 0);
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("order_recipients").await, 0);
}

#[tokio::test]
async fn details_that_need_fixing_name_each_field_and_nothing_is_stored() {
    let app = spawn_app().await;
    let mut body = order_with(json!([{"sku": "MUG-001", "quantity": 1}]));
    body["email"] = json!("ada at example");
    body["shipping_address"]["postal_code"] = json!("");
    body["shipping_address"]["country"] = json!("XX");
    let response = post_order(&app.client, &app, Some("fix-me"), &body.to_string()).await;
    let problem = assert_problem(response, 422, "invalid-details").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .expect("a list of fields")
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "email",
            "shipping_address.postal_code",
            "shipping_address.country"
        ]
    );
    assert!(problem["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("name@example.com"));
    assert_eq!(problem["retryable"], false);

    // The checkout's API door checks them the same way, before its key is claimed.
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let mut details = details();
    details["shipping_address"]["city"] = json!("Lon\ndon");
    let response = checkout_api_with(&app, &key, &[])
        .json(&details)
        .send()
        .await
        .unwrap();
    let problem = assert_problem(response, 422, "invalid-details").await;
    assert_eq!(problem["errors"][0]["field"], "shipping_address.city");
    nothing_stored(&app).await;
}

#[tokio::test]
async fn the_no_wasm_form_keeps_what_was_typed_and_marks_each_field_to_fix() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let mut form: Vec<(&str, &str)> = vec![("idempotency_key", &key)];
    form.extend(DETAILS_FORM.iter().filter(|(name, _)| *name != "email"));
    form.push(("email", "ada@example"));
    let response = app
        .client
        .post(app.url("/checkout"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(location(&response), "/checkout?problem=invalid-details");
    nothing_stored(&app).await;

    // The page it is sent back to shows what was typed, and the email's problem beside it.
    let page = app
        .get_text(&app.client, "/checkout?problem=invalid-details")
        .await;
    assert!(
        page.contains(r#"value="ada@example""#),
        "the typed email is kept"
    );
    assert!(page.contains(r#"value="1 Main Street""#), "the rest too");
    assert!(page.contains("Enter an email address like name@example.com."));
    assert!(page.contains(r#"id="details-email" type="email" name="email""#));
}

#[tokio::test]
async fn the_same_checkout_key_with_other_details_is_refused_while_the_first_runs_and_after() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    // The first submit is held inside its transaction: the shopper edits the street and
    // presses again under the same key.
    let first = {
        let request = checkout_api_with(&app, &key, &[("once-test-hold", "first")]);
        tokio::spawn(async move { request.send().await.unwrap() })
    };
    let edited = || async {
        let answer = checkout_api_with(&app, &key, &[])
            .json(&fixed_details())
            .send()
            .await
            .unwrap();
        assert_problem(answer, 422, "idempotency-key-reused").await;
    };
    eventually("the first submit holds its key", || async {
        app.key_state(&key).await.as_deref() == Some("processing")
    })
    .await;
    edited().await;
    app.open_gate("first").await;
    let first = first.await.unwrap();
    assert_eq!(first.status(), 201);

    // After it: the cart has moved on, and the key holds the order placed with the first
    // details. The same details replay it; other details are refused, never answered with
    // an order they were not placed with.
    edited().await;
    let again = checkout_api(&app, &key).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let order: serde_json::Value = again.json().await.unwrap();
    assert_eq!(order["shipping_address"]["line1"], "1 Main Street");
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("order_recipients").await, 1);
    // The journal tells the refusal after the order as a reused key on it, not as a replay
    // (the one while it ran was of no order yet: no story's).
    repeats_written(&app, "key_reused", 1).await;
    repeats_written(&app, "replay", 1).await;
}

#[tokio::test]
async fn an_order_carries_its_details_and_its_event_carries_none() {
    let app = spawn_app().await;
    let response = post_order(&app.client, &app, Some("ada-1"), MUG_ORDER).await;
    assert_eq!(response.status(), 201);
    let placed: serde_json::Value = response.json().await.unwrap();
    let shown = app
        .get_json(
            &app.client,
            &format!("/api/orders/{}", placed["id"].as_str().unwrap()),
        )
        .await;
    for order in [&placed, &shown] {
        assert_eq!(order["email"], "ada@example.com");
        assert_eq!(order["shipping_address"]["postal_code"], "SW1Y 4JH");
        assert_eq!(order["shipping_address"]["country"], "GB");
    }
    let page = app
        .get_text(
            &app.client,
            &format!("/orders/{}", placed["id"].as_str().unwrap()),
        )
        .await;
    assert!(page.contains("Ada Lovelace") && page.contains("SW1Y 4JH London"));
    assert!(page.contains("United Kingdom") && page.contains("ada@example.com"));

    let events: Vec<String> = sqlx::query_scalar("SELECT payload::text FROM outbox_events")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert!(!events.is_empty());
    for event in events {
        assert!(
            !event.contains("ada@example.com") && !event.contains("Lovelace"),
            "{event}"
        );
    }
}

#[tokio::test]
async fn the_confirmation_goes_to_the_shopper_and_names_the_address() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    let order_id = app.paid_order_for(MUG_ORDER).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    drain(&context, &mut consumer).await;
    let (recipient, text): (String, String) =
        sqlx::query_as("SELECT recipient, text_body FROM emails WHERE order_id = $1")
            .bind(order_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(recipient, "ada@example.com");
    assert!(
        text.contains("Ada Lovelace\n1 Main Street\nSW1Y 4JH London\nUnited Kingdom"),
        "{text}"
    );
}

#[tokio::test]
async fn a_finished_order_forgets_its_shopper_after_retention_and_keeps_its_books() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for key in ["old", "recent", "open", "sending", "stuck"] {
        let response = post_order(&app.client, &app, Some(key), MUG_ORDER).await;
        let order: serde_json::Value = response.json().await.unwrap();
        ids.push(order["id"].as_str().unwrap().parse::<Uuid>().unwrap());
    }
    let (old, recent, open, sending, stuck) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
    let email = |order: Uuid, status: &str, age: &str| {
        format!(
            "INSERT INTO emails (id, order_id, kind, recipient, subject, html_body, text_body, status, created_at)
             VALUES (gen_random_uuid(), '{order}', 'order_confirmation', 'ada@example.com', 's', 'h', 't',
                     '{status}', now() - interval '{age}');"
        )
    };
    let setup = format!(
        "UPDATE orders SET status = 'cancelled', updated_at = now() - interval '91 days'
          WHERE id IN ('{old}', '{sending}', '{stuck}');
         UPDATE orders SET status = 'cancelled', updated_at = now() - interval '89 days' WHERE id = '{recent}';
         UPDATE orders SET updated_at = now() - interval '200 days' WHERE id = '{open}';
         {} {} {}",
        email(old, "kept", "91 days"),
        // Still being sent: left to finish. Queued past the retention: it never will be.
        email(sending, "queued", "1 minute"),
        email(stuck, "queued", "91 days"),
    );
    run(&app, &setup).await;
    let retention = Duration::from_secs(90 * 86_400);
    let forgotten = server::orders::personal_data::forget_finished(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(forgotten, 2);
    let kept: Vec<Uuid> =
        sqlx::query_scalar("SELECT order_id FROM order_recipients ORDER BY order_id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    let mut expected = vec![recent, open, sending];
    expected.sort();
    assert_eq!(
        kept, expected,
        "only orders finished past retention, and not sending their email, forget their shopper"
    );
    let emails: Vec<Uuid> = sqlx::query_scalar("SELECT order_id FROM emails")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(
        emails,
        [sending],
        "the forgotten orders' emails named the shopper"
    );

    let shown = app
        .get_json(&app.client, &format!("/api/orders/{old}"))
        .await;
    assert_eq!(shown["total_cents"], 3600, "the books stay");
    assert_eq!(shown["items"][0]["quantity"], 2);
    assert_eq!(shown["status"], "cancelled");
    assert!(shown.get("email").is_none() && shown.get("shipping_address").is_none());
    let page = app.get_text(&app.client, &format!("/orders/{old}")).await;
    assert!(page.contains("No shipping details are kept for this order."));
    // Nothing more to forget until the last email is sent; then it goes too.
    let again = server::orders::personal_data::forget_finished(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(again, 0);
    run(
        &app,
        &format!("UPDATE emails SET status = 'kept' WHERE order_id = '{sending}'"),
    )
    .await;
    let last = server::orders::personal_data::forget_finished(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(last, 1);
}

#[tokio::test]
async fn a_cart_left_alone_forgets_the_details_typed_into_it() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let keep = |form: &'static [(&'static str, &'static str)]| {
        let app = &app;
        async move {
            let kept = app
                .post_fn(&app.client, "save_checkout_details", form)
                .await;
            assert!(kept.status().is_success(), "{}", kept.status());
        }
    };
    // A NUL, which PostgreSQL cannot keep, is dropped from the draft: never a 500.
    keep(&[
        ("email", "ada\0@example.com"),
        ("name", ""),
        ("line1", ""),
        ("line2", ""),
        ("postal_code", ""),
        ("city", ""),
        ("country", ""),
    ])
    .await;
    keep(DETAILS_FORM).await;
    assert!(app
        .get_text(&app.client, "/checkout")
        .await
        .contains(r#"value="Ada Lovelace""#));
    let retention = Duration::from_secs(86_400);
    assert_eq!(
        server::checkout_details::forget_old(&app.db, retention)
            .await
            .unwrap(),
        0
    );
    run(
        &app,
        "UPDATE carts SET details_saved_at = now() - interval '25 hours'",
    )
    .await;
    assert_eq!(
        server::checkout_details::forget_old(&app.db, retention)
            .await
            .unwrap(),
        1
    );
    assert!(!app
        .get_text(&app.client, "/checkout")
        .await
        .contains("Ada Lovelace"));
    assert_eq!(
        app.cart(&app.client).await["lines"][0]["quantity"],
        2,
        "the cart stays"
    );
}

#[tokio::test]
async fn the_operator_finds_a_shoppers_orders_by_email_and_reads_where_they_ship() {
    let app =
        spawn_app_with(|c| c.operator_password = Some(crate::operator::PASSWORD.into())).await;
    let (client, _) = crate::operator::operator(&app).await;
    let search = |q: &'static str| {
        let client = client.clone();
        let url = app.url("/operator/search");
        async move { client.get(url).query(&[("q", q)]).send().await.unwrap() }
    };
    let first = post_order(&app.client, &app, Some("first"), MUG_ORDER).await;
    let order: serde_json::Value = first.json().await.unwrap();
    let order_no = order["order_no"].as_str().unwrap().to_owned();
    let found = search(" ADA@Example.com ").await;
    assert_eq!(found.status(), 303, "one order: its journal");
    let journal = found.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(journal, format!("/operator/orders/{order_no}"));
    let html = app.get_text(&client, &journal).await;
    assert!(
        html.contains("Ada Lovelace, 1 Main Street, SW1Y 4JH London, GB"),
        "{html}"
    );
    assert!(html.contains("ada@example.com"));

    let second = post_order(&app.client, &app, Some("second"), MUG_ORDER).await;
    assert_eq!(second.status(), 201);
    let found = search("ada@example.com").await;
    assert_eq!(found.status(), 200, "two orders: a list");
    assert_eq!(
        found
            .text()
            .await
            .unwrap()
            .matches("/operator/orders/ONC-")
            .count(),
        2
    );
    assert_eq!(search("bob@example.com").await.status(), 404);

    // Forgotten: the journal says so, and the email finds nothing any more.
    run(
        &app,
        "UPDATE orders SET status = 'cancelled', updated_at = now() - interval '100 days'",
    )
    .await;
    let retention = Duration::from_secs(90 * 86_400);
    server::orders::personal_data::forget_finished(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(search("ada@example.com").await.status(), 404);
    let html = app.get_text(&client, &journal).await;
    assert!(
        html.contains("The shopper's details were forgotten on"),
        "{html}"
    );
    assert!(!html.contains("Lovelace"));
}
