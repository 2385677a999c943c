//! Payments across the process boundary: the shop charging the sandbox provider over HTTP.

use crate::helpers::*;

#[tokio::test]
async fn paying_charges_once_and_marks_the_order_paid() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let response = pay(&app, &order_id, "pay-1", CARD_OK, &[]).await;
    assert_eq!(response.status(), 201);
    let payment: serde_json::Value = response.json().await.unwrap();
    assert_eq!(payment["status"], "succeeded");
    assert_eq!(payment["order_id"], order_id.as_str());
    assert_eq!(
        payment["amount_cents"], 3600,
        "the amount comes from the order"
    );
    assert!(payment["provider_charge_id"]
        .as_str()
        .unwrap()
        .starts_with("ch_"));
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(
        provider.charges_for(payment["id"].as_str().unwrap()).await,
        1
    );

    // The provider's webhook for the same charge arrives and changes nothing.
    eventually("the webhook arrived", || async {
        app.count("payment_callbacks").await == 1
    })
    .await;
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );

    // A repeat with the same key is a replay: no second charge.
    let again = pay(&app, &order_id, "pay-1", CARD_OK, &[]).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(provider.charges().await, 1);
}

#[tokio::test]
async fn a_dropped_provider_response_is_retried_with_the_same_provider_key() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let response = pay(&app, &order_id, "pay-lost", CARD_DROPS_RESPONSE, &[]).await;
    assert_eq!(
        response.status(),
        201,
        "our retry got the provider's replay"
    );
    let payment: serde_json::Value = response.json().await.unwrap();
    assert_eq!(payment["status"], "succeeded");
    assert_eq!(
        provider.charges().await,
        1,
        "one charge in the provider's ledger"
    );
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
}

#[tokio::test]
async fn a_failed_request_retried_with_the_same_key_resumes_the_same_attempt() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // The provider charges (its response is lost once), then our final transaction fails.
    let failed = pay(
        &app,
        &order_id,
        "pay-resume",
        CARD_DROPS_RESPONSE,
        &[("once-test-fail", "transient")],
    )
    .await;
    assert_eq!(failed.status(), 503);
    assert_eq!(app.key_state("pay-resume").await.as_deref(), Some("failed"));
    assert_eq!(
        app.count("payments").await,
        1,
        "recovery point 1 (the attempt) was committed"
    );

    let retry = pay(&app, &order_id, "pay-resume", CARD_DROPS_RESPONSE, &[]).await;
    assert_eq!(retry.status(), 201);
    assert_eq!(
        provider.charges().await,
        1,
        "the provider replayed the charge instead of charging again"
    );
    assert_eq!(
        app.count("payments").await,
        1,
        "the same attempt was resumed"
    );
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(app.order_status(&order_id).await, "paid");
}

#[tokio::test]
async fn a_declined_card_leaves_the_order_pending_and_a_new_intent_can_pay() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let declined = pay(&app, &order_id, "pay-declined", CARD_DECLINED, &[]).await;
    let problem = assert_problem(declined, 402, "card-declined").await;
    assert_eq!(problem["retryable"], false);
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(app.count_where("payments", "status = 'failed'").await, 1);

    let replay = pay(&app, &order_id, "pay-declined", CARD_DECLINED, &[]).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.status(), 402);

    let second = pay(&app, &order_id, "pay-again", CARD_OK, &[]).await;
    assert_eq!(second.status(), 201);
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(provider.charges().await, 2, "one declined, one succeeded");

    let third = pay(&app, &order_id, "pay-third", CARD_OK, &[]).await;
    assert_problem(third, 422, "order-not-payable").await;
    assert_eq!(
        provider.charges().await,
        2,
        "a paid order is not charged again"
    );
}

#[tokio::test]
async fn the_provider_callback_alone_marks_the_order_paid() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // The charge succeeds at the provider, but our final transaction fails and nobody retries.
    let failed = pay(
        &app,
        &order_id,
        "pay-cb",
        CARD_OK,
        &[("once-test-fail", "transient")],
    )
    .await;
    assert_eq!(failed.status(), 503);
    eventually("the callback marked the order paid", || async {
        app.order_status(&order_id).await == "paid"
    })
    .await;
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn another_sessions_order_cannot_be_paid() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let stranger = shopper();
    app.open_session(&stranger).await;
    let response = stranger
        .post(app.url(&format!("/api/orders/{order_id}/payments")))
        .header("idempotency-key", "theirs")
        .json(&serde_json::json!({ "card_number": CARD_OK }))
        .send()
        .await
        .unwrap();
    assert_problem(response, 404, "not-found").await;
    assert_eq!(provider.charges().await, 0);
}

#[tokio::test]
async fn a_second_succeeded_payment_for_one_order_is_refused_by_the_partial_unique_index() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let insert = |key: &'static str| {
        sqlx::query(
            "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, status, amount_cents, currency)
             VALUES (gen_random_uuid(), $1::uuid, 'sql', $2, 'succeeded', 3600, 'EUR')",
        )
        .bind(order_id.clone())
        .bind(key)
        .execute(&app.db)
    };
    insert("first").await.unwrap();
    let second = insert("second").await.unwrap_err();
    assert_eq!(
        second.as_database_error().unwrap().constraint(),
        Some("payments_one_success_per_order")
    );
}
