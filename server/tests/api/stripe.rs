//! Paying through Stripe's API, proved against localstripe: a stateful fake of Stripe that
//! this project did not write, run as a real process per test. localstripe ignores
//! Idempotency-Key, so what the shop's own defences carry without it shows: the intent
//! recorded before it is confirmed, callbacks confirmed by reading the intent back, the
//! reconciler reading Stripe's events and refunding a second charge once.

use serde_json::{json, Value};

use crate::helpers::*;
use crate::reconcile::{reconciler, run};

/// The attempt of `order_id` (its only one), as the shop recorded it.
async fn attempt(app: &TestApp, order_id: &str) -> (String, String, Option<String>) {
    sqlx::query_as(
        "SELECT id::text, status, provider_intent_id FROM payments WHERE order_id = $1::uuid",
    )
    .bind(order_id)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// Pays, and loses the answer after the shop's writes (a 503 after Stripe answered).
async fn lose_the_answer(app: &TestApp, order_id: &str, key: &str, method: &str) {
    let lost = pay_with_method(app, order_id, key, method)
        .header("once-test-fail", "transient")
        .send()
        .await
        .unwrap();
    assert_eq!(lost.status(), 503);
}

/// Waits until the shop recorded `n` Stripe callbacks; returns their outcomes.
async fn callbacks(app: &TestApp, n: i64) -> Vec<String> {
    eventually("the webhooks arrive", || async {
        app.count_where("payment_callbacks", "event_id LIKE 'evt_%'")
            .await
            >= n
    })
    .await;
    sqlx::query_scalar("SELECT outcome FROM payment_callbacks ORDER BY received_at")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_card_paid_through_stripe_pays_the_order_once_and_ships_it_once() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let response = pay_with_method(&app, &order_id, "pay-1", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let payment: Value = response.json().await.unwrap();
    assert_eq!(payment["status"], "succeeded");
    let intents = stripe.intents_of_order(&order_id).await;
    assert_eq!(intents.len(), 1, "one intent for the order");
    assert_eq!(payment["provider_charge_id"], intents[0]["id"]);
    assert_eq!(
        (
            intents[0]["amount"].as_i64(),
            intents[0]["currency"].as_str()
        ),
        (Some(3600), Some("eur"))
    );
    assert_eq!(app.order_status(&order_id).await, "paid");
    // Stripe's own webhook comes after the answer: recorded, and it changes nothing.
    assert_eq!(callbacks(&app, 1).await, ["already_applied"]);
    let context = app.workers().await;
    let mut fulfillment = redelivering_fulfillment(&context).await;
    drain(&context, &mut fulfillment).await;
    assert_eq!(app.order_status(&order_id).await, "fulfilled");
    assert_eq!(app.count("fulfillments").await, 1, "shipped once");
    assert_eq!(stripe.charged(&order_id).await, 1, "charged once");
}

#[tokio::test]
async fn a_declined_card_declines_the_attempt_and_charges_nothing() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let response = pay_with_method(&app, &order_id, "pay-1", PM_DECLINED)
        .send()
        .await
        .unwrap();
    assert_problem(response, 402, "card-declined").await;
    let (_, status, _) = attempt(&app, &order_id).await;
    assert_eq!(status, "failed");
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(stripe.charged(&order_id).await, 0);
    // Its `payment_intent.payment_failed` arrives and changes nothing more.
    assert_eq!(callbacks(&app, 1).await, ["already_applied"]);
    // The order can still be paid with another card.
    let again = pay_with_method(&app, &order_id, "pay-2", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 201);
}

#[tokio::test]
async fn a_lost_answer_resumes_the_recorded_intent_and_charges_once() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    // Its webhooks go nowhere: only the retry can settle the attempt.
    stripe.send_webhooks_to("http://127.0.0.1:9/nowhere").await;
    let order_id = place_order(&app).await;
    // Stripe confirmed the intent; the answer is lost after it (a 503 after the writes).
    lose_the_answer(&app, &order_id, "pay-1", PM_VISA).await;
    let (_, status, intent) = attempt(&app, &order_id).await;
    assert_eq!(status, "pending");
    assert!(
        intent.is_some(),
        "the intent was recorded before it was confirmed"
    );
    assert_eq!(stripe.charged(&order_id).await, 1);
    let retry = pay_with_method(&app, &order_id, "pay-1", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(retry.status(), 201);
    assert_eq!(
        stripe.intents_of_order(&order_id).await.len(),
        1,
        "no second intent"
    );
    assert_eq!(stripe.charged(&order_id).await, 1);
    assert_eq!(app.order_status(&order_id).await, "paid");
}

#[tokio::test]
async fn a_webhook_delivered_twice_and_out_of_order_is_applied_once() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    // The answer is lost, so Stripe's webhook is what pays the order.
    lose_the_answer(&app, &order_id, "pay-1", PM_VISA).await;
    assert_eq!(callbacks(&app, 1).await, ["applied"]);
    assert_eq!(app.order_status(&order_id).await, "paid");
    let succeeded = stripe.events("payment_intent.succeeded").await.remove(0);
    // The same event again, then a failure of the same intent arriving after its success.
    let again = deliver(&app, &succeeded, STRIPE_WEBHOOK_SECRET).await;
    assert_eq!(again.json::<Value>().await.unwrap()["outcome"], "duplicate");
    let mut failed = succeeded.clone();
    failed["id"] = json!("evt_late_failure");
    failed["type"] = json!("payment_intent.payment_failed");
    failed["data"]["object"]["status"] = json!("requires_payment_method");
    failed["data"]["object"]["last_payment_error"] = json!({"code": "card_declined"});
    let late = deliver(&app, &failed, STRIPE_WEBHOOK_SECRET).await;
    assert_eq!(
        late.json::<Value>().await.unwrap()["outcome"],
        "already_applied"
    );
    let (_, status, _) = attempt(&app, &order_id).await;
    assert_eq!(status, "succeeded");
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_webhook_with_another_secret_or_another_orders_intent_changes_nothing() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    stripe.send_webhooks_to("http://127.0.0.1:9/nowhere").await;
    // Order A's attempt is pending (its answer lost); order B is paid.
    let order_a = place_order(&app).await;
    lose_the_answer(&app, &order_a, "pay-a", PM_DECLINED).await;
    let (payment_a, _, _) = attempt(&app, &order_a).await;
    let order_b = place_order(&app).await;
    let paid = pay_with_method(&app, &order_b, "pay-b", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let mut event = stripe.events("payment_intent.succeeded").await.remove(0);
    // B's intent, claimed for A's attempt.
    event["id"] = json!("evt_forged");
    event["data"]["object"]["metadata"]["payment_id"] = json!(payment_a);
    event["data"]["object"]["metadata"]["order_id"] = json!(order_a);
    let unsigned = deliver(&app, &event, "whsec_someone_elses_secret").await;
    assert_problem(unsigned, 401, "signature-invalid").await;
    assert_eq!(app.count("payment_callbacks").await, 0, "nothing stored");
    let signed = deliver(&app, &event, STRIPE_WEBHOOK_SECRET).await;
    assert_eq!(
        signed.json::<Value>().await.unwrap()["outcome"],
        "unconfirmed"
    );
    let (_, status, _) = attempt(&app, &order_a).await;
    assert_eq!(status, "pending", "another order's intent pays nothing");
    assert_eq!(app.order_status(&order_a).await, "pending_payment");
}

/// An intent of one cent whose metadata names a declined attempt, then its event signed with
/// the endpoint's secret but claiming the order's total: what Stripe says the intent is for
/// decides, so both the forged event and Stripe's own are mismatches; nothing is paid.
#[tokio::test]
async fn a_signed_event_claiming_more_than_the_intent_is_a_mismatch() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    stripe.send_webhooks_to("http://127.0.0.1:9/nowhere").await;
    let order_id = place_order(&app).await;
    let declined = pay_with_method(&app, &order_id, "pay-1", PM_DECLINED)
        .send()
        .await
        .unwrap();
    assert_problem(declined, 402, "card-declined").await;
    let (payment_id, _, declined_intent) = attempt(&app, &order_id).await;
    let cent = stripe.stray_intent(&payment_id, &order_id, 1).await;
    assert_eq!(cent["status"], "succeeded");
    let own = stripe.events("payment_intent.succeeded").await.remove(0);
    let mut forged = own.clone();
    forged["id"] = json!("evt_claims_all");
    forged["data"]["object"]["amount"] = json!(3600);
    forged["data"]["object"]["amount_received"] = json!(3600);
    for event in [&forged, &own] {
        let answer = deliver(&app, event, STRIPE_WEBHOOK_SECRET).await;
        assert_eq!(
            answer.json::<Value>().await.unwrap()["outcome"],
            "amount_mismatch"
        );
    }
    assert_eq!(
        attempt(&app, &order_id).await,
        (payment_id, "failed".to_owned(), declined_intent)
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        0
    );
}

#[tokio::test]
async fn the_reconciler_pays_an_order_whose_webhook_never_came_from_stripes_events() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    stripe.send_webhooks_to("http://127.0.0.1:9/nowhere").await;
    let order_id = place_order(&app).await;
    lose_the_answer(&app, &order_id, "pay-1", PM_VISA).await;
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    let reconciler = reconciler(&app).await;
    let summary = run(&reconciler).await;
    assert_eq!((summary.charges_seen, summary.findings), (1, 1));
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(
        app.count_where("reconcile_findings", "kind = 'missed_success'")
            .await,
        1
    );
    assert_eq!(
        run(&reconciler).await.findings,
        0,
        "a second run finds nothing new"
    );
}

#[tokio::test]
async fn two_intents_charged_for_one_order_are_refunded_once() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let paid = pay_with_method(&app, &order_id, "pay-1", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let (payment_id, _, kept) = attempt(&app, &order_id).await;
    // A second intent for the same attempt, as a create Stripe did not deduplicate would be.
    let stray = stripe.stray_intent(&payment_id, &order_id, 3600).await;
    assert_eq!(stray["status"], "succeeded");
    assert_eq!(stripe.charged(&order_id).await, 2);
    let reconciler = reconciler(&app).await;
    run(&reconciler).await;
    run(&reconciler).await;
    let stray_id = stray["id"].as_str().unwrap();
    assert_eq!(
        stripe.refunds_of(stray_id).await,
        1,
        "the second charge, refunded once"
    );
    assert_eq!(
        stripe.refunds_of(kept.as_deref().unwrap()).await,
        0,
        "the order's own charge kept"
    );
    assert_eq!(
        app.count_where("reconcile_findings", "kind = 'double_charge'")
            .await,
        1
    );
    assert_eq!(app.order_status(&order_id).await, "paid");
}

#[tokio::test]
async fn in_stripe_mode_a_card_number_is_refused_and_the_sandbox_route_is_not_found() {
    let (app, _stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let card = pay(&app, &order_id, "pay-1", CARD_OK, &[]).await;
    assert_problem(card, 422, "invalid-card").await;
    assert_eq!(app.count("payments").await, 0, "nothing stored");
    let sandbox = app
        .client
        .post(app.url("/webhooks/provider"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(sandbox.status(), 404);
}

#[tokio::test]
async fn with_the_sandbox_the_stripe_route_is_not_found_and_a_payment_method_refused() {
    let app = spawn_app_with_faults(|_| {}).await;
    let stripe_route = app
        .client
        .post(app.url("/webhooks/stripe"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(stripe_route.status(), 404);
    let order_id = place_order(&app).await;
    let method = pay_with_method(&app, &order_id, "pay-1", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_problem(method, 422, "invalid-card").await;
}

#[tokio::test]
async fn an_abandoned_attempts_unconfirmed_intent_is_cancelled_before_another_card_pays() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    // An attempt whose request died between recording its intent and confirming it, long ago.
    let abandoned = pending_attempt(&app, &order_id).await;
    let intent = stripe
        .post(
            "/v1/payment_intents",
            &[
                ("amount", "3600"),
                ("currency", "eur"),
                ("payment_method", PM_VISA),
                ("metadata[payment_id]", &abandoned),
                ("metadata[order_id]", &order_id),
            ],
        )
        .await;
    let intent_id = intent["id"].as_str().unwrap();
    sqlx::query("UPDATE payments SET provider_intent_id = $2 WHERE id = $1::uuid")
        .bind(&abandoned)
        .bind(intent_id)
        .execute(&app.db)
        .await
        .unwrap();
    backdate_attempt(&app, &abandoned, 1).await;
    let paid = pay_with_method(&app, &order_id, "pay-2", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let left = stripe
        .get(&format!("/v1/payment_intents/{intent_id}"))
        .await;
    assert_eq!(left["status"], "canceled", "it can never be confirmed now");
    let failure: String =
        sqlx::query_scalar("SELECT failure_code FROM payments WHERE id = $1::uuid")
            .bind(&abandoned)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(failure, "not_charged");
    assert_eq!(stripe.charged(&order_id).await, 1);
}
