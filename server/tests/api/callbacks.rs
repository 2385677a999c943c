//! Provider callbacks: signed, deduplicated by transaction number, applied once, forward only.

use crate::helpers::*;
use crate::reconcile::payment_status;

#[tokio::test]
async fn twenty_concurrent_duplicates_plus_reordered_and_late_callbacks_apply_once() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // The charge's answer is still on the way: the storm is what settles the attempt.
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    let succeeded = callback("charge.succeeded", "txn_storm", &charge, 3600, &payment_id);
    let deliveries: Vec<_> = (0..20)
        .map(|_| {
            let request = signed_callback(&app, &succeeded, TEST_WEBHOOK_SECRET, now());
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 200);
                let body: serde_json::Value = response.json().await.unwrap();
                body["outcome"].as_str().unwrap().to_owned()
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for delivery in deliveries {
        outcomes.push(delivery.await.unwrap());
    }
    outcomes.sort();
    assert_eq!(
        outcomes.iter().filter(|o| *o == "applied").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| *o == "duplicate").count(),
        19,
        "{outcomes:?}"
    );

    // Late and out of order: a failure after the success, and another copy of the success.
    let late_failure = callback(
        "charge.failed",
        "txn_late_failure",
        &charge,
        3600,
        &payment_id,
    );
    assert_eq!(app.send_callback(&late_failure, now()).await.status(), 200);
    assert_eq!(app.send_callback(&succeeded, now()).await.status(), 200);

    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(
        app.count_where("payments", "status = 'failed'").await,
        0,
        "a late failure never undoes a success"
    );
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
    assert_eq!(
        app.count_where("payment_callbacks", "provider_tx_no = 'txn_storm'")
            .await,
        1
    );
}

#[tokio::test]
async fn the_providers_own_webhook_delivered_twenty_times_settles_a_pending_attempt_once() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    provider.settings.set_chaos(provider::settings::Chaos {
        duplicates: 19,
        ..Default::default()
    });
    // The provider charges the attempt (as our call did, whose answer was lost) and then
    // announces it twenty times.
    provider.charge(&payment_id, "4242424242424242", 3600).await;
    eventually("all twenty deliveries landed", || async {
        provider.delivered().await == 20
    })
    .await;
    assert_eq!(app.order_status(&order_id).await, "paid");
    let outcomes: Vec<String> = sqlx::query_scalar("SELECT outcome FROM payment_callbacks")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(outcomes, ["applied"], "recorded once, applied once");
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_charge_answer_racing_its_callback_is_applied_once() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // The charge answer is applied and held before its commit, holding the payment's lock.
    let paying = spawn_pay(
        &app,
        &order_id,
        "race-1",
        "4242424242424242",
        &[("once-test-hold", "race")],
    );
    app.wait_until_held("race", 1).await;
    // The provider's webhook arrives meanwhile and waits for that lock.
    app.wait_for_lock_waiters(1, "the callback waits on the payment's lock")
        .await;
    app.open_gate("race").await;
    let paid = paying.await.unwrap();
    assert_eq!(paid.status(), 201);
    assert!(paid.headers().get("idempotent-replayed").is_none());
    eventually("the callback is recorded", || async {
        app.count_where("payment_callbacks", "outcome = 'already_applied'")
            .await
            == 1
    })
    .await;
    assert_eq!(provider.charges().await, 1);
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_success_arriving_before_the_charge_answer_is_applied_once() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    let early = callback("charge.succeeded", "txn_early", &charge, 3600, &payment_id);
    let body: serde_json::Value = app.send_callback(&early, now()).await.json().await.unwrap();
    assert_eq!(body["outcome"], "applied");
    assert_eq!(app.order_status(&order_id).await, "paid");
    let again: serde_json::Value = app.send_callback(&early, now()).await.json().await.unwrap();
    assert_eq!(again["outcome"], "duplicate");
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn bad_signatures_and_bodies_are_refused_and_nothing_is_stored() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let body = callback(
        "charge.succeeded",
        "txn_bad",
        "ch_x",
        3600,
        &uuid::Uuid::new_v4().to_string(),
    );
    let bytes = serde_json::to_vec(&body).unwrap();
    let signed = |t: i64, secret: &str| provider::webhooks::sign(secret, t, &bytes);
    let post = |signature: Option<String>, payload: Vec<u8>| {
        let mut request = shopper().post(app.url("/webhooks/provider")).body(payload);
        if let Some(s) = signature {
            request = request.header("once-signature", s);
        }
        request.send()
    };
    let dev = TEST_WEBHOOK_SECRET;
    assert_problem(
        post(None, bytes.clone()).await.unwrap(),
        400,
        "signature-missing",
    )
    .await;
    assert_problem(
        post(Some("v1=zz".into()), bytes.clone()).await.unwrap(),
        400,
        "signature-malformed",
    )
    .await;
    assert_problem(
        post(Some(signed(now(), "wrong-secret")), bytes.clone())
            .await
            .unwrap(),
        401,
        "signature-invalid",
    )
    .await;
    assert_problem(
        post(Some(signed(now() - 330, dev)), bytes.clone())
            .await
            .unwrap(),
        401,
        "signature-expired",
    )
    .await;
    assert_problem(
        post(Some(signed(now() + 330, dev)), bytes.clone())
            .await
            .unwrap(),
        401,
        "signature-expired",
    )
    .await;
    let mut tampered = bytes.clone();
    tampered[10] ^= 1;
    assert_problem(
        post(Some(signed(now(), dev)), tampered).await.unwrap(),
        401,
        "signature-invalid",
    )
    .await;
    let garbage = b"{not json".to_vec();
    let garbage_sig = provider::webhooks::sign(dev, now(), &garbage);
    assert_problem(
        post(Some(garbage_sig), garbage).await.unwrap(),
        400,
        "invalid-callback",
    )
    .await;
    assert_eq!(app.count("payment_callbacks").await, 0);

    // Within the tolerance, with the right secret: accepted.
    assert_eq!(
        post(Some(signed(now() - 290, dev)), bytes.clone())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(app.count("payment_callbacks").await, 1);
}

#[tokio::test]
async fn a_callback_whose_amount_does_not_match_the_order_is_refused_and_recorded() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    let wrong = callback("charge.succeeded", "txn_wrong", &charge, 1, &payment_id);
    let body: serde_json::Value = app.send_callback(&wrong, now()).await.json().await.unwrap();
    assert_eq!(body["outcome"], "amount_mismatch");
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 0);
    assert_eq!(
        app.count_where("payment_callbacks", "outcome = 'amount_mismatch'")
            .await,
        1
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        0
    );
}

#[tokio::test]
async fn a_rotated_secret_is_still_accepted() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let rotated = start(
        server::config::Config {
            webhook_secrets: vec![
                "whsec_new_rotated_secret".into(),
                TEST_WEBHOOK_SECRET.into(),
            ],
            listen_addr: "127.0.0.1:0".parse().unwrap(),
            ..app.config.clone()
        },
        app.db_name.clone(),
    )
    .await;
    let body = callback(
        "charge.succeeded",
        "txn_rotated",
        "ch_r",
        3600,
        &uuid::Uuid::new_v4().to_string(),
    );
    for secret in ["whsec_new_rotated_secret", TEST_WEBHOOK_SECRET] {
        let response = signed_callback(&rotated, &body, secret, now())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "signed with {secret}");
    }
}

/// The attempt's id and the charge id its own call recorded.
async fn attempt_of(app: &TestApp, order_id: &str) -> (String, Option<String>) {
    sqlx::query_as("SELECT id::text, provider_charge_id FROM payments WHERE order_id = $1::uuid")
        .bind(order_id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_signed_callback_cannot_give_an_attempt_a_charge_the_provider_never_made_for_it() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let declined = pay(&app, &order_id, "declined", CARD_DECLINED, &[]).await;
    assert_eq!(declined.status(), 402);
    let (payment_id, own_charge) = attempt_of(&app, &order_id).await;
    assert!(own_charge.is_some());
    // Signed, but naming a charge the provider never issued, another order's charge, or
    // the attempt's own charge, which the provider declined.
    let (_, _, elsewhere) = paid_order(&app).await;
    let declined_charge = own_charge.clone().unwrap();
    for (tx_no, charge) in [
        ("txn_forged", "ch_never_issued"),
        ("txn_borrowed", elsewhere.as_str()),
        ("txn_revived", declined_charge.as_str()),
    ] {
        let forged = callback("charge.succeeded", tx_no, charge, 3600, &payment_id);
        assert_eq!(app.callback_outcome(&forged).await, "unconfirmed");
    }
    assert_eq!(
        attempt_of(&app, &order_id).await,
        (payment_id.clone(), own_charge)
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(
        app.count_where("payment_callbacks", "outcome = 'unconfirmed'")
            .await,
        3
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1,
        "only the other order's own payment"
    );
}

#[tokio::test]
async fn a_callback_the_provider_cannot_be_asked_about_is_retried_not_recorded() {
    let app = spawn_app_with_faults(|c| c.provider_url = "http://127.0.0.1:9".into()).await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let early = callback(
        "charge.succeeded",
        "txn_unasked",
        "ch_unasked",
        3600,
        &payment_id,
    );
    let response = app.send_callback(&early, now()).await;
    assert_problem(response, 503, "service-unavailable").await;
    assert_eq!(
        app.count("payment_callbacks").await,
        0,
        "delivered again later"
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
}

/// A success for an attempt that already succeeded changes nothing, so it is recorded
/// without locking anything: an order held by a long transaction elsewhere does not hold
/// the provider's deliveries up.
#[tokio::test]
async fn a_success_for_a_settled_attempt_is_recorded_without_waiting_for_its_order() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let (order_id, payment_id, charge) = paid_order(&app).await;
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM orders WHERE id = $1::uuid FOR UPDATE")
        .bind(&order_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let again = callback("charge.succeeded", "txn_again", &charge, 3600, &payment_id);
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        app.callback_outcome(&again),
    )
    .await
    .expect("answered while the order's row is locked");
    assert_eq!(outcome, "already_applied");
    holder.rollback().await.unwrap();
    let stored: (Option<String>, String) = sqlx::query_as(
        "SELECT charge_id, outcome FROM payment_callbacks WHERE provider_tx_no = 'txn_again'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(stored, (Some(charge), "already_applied".to_owned()));
}

/// The shortcut above is only for a success whose amount is the order's: another amount
/// for a settled attempt is still refused as a mismatch, for an operator to see.
#[tokio::test]
async fn a_success_of_another_amount_for_a_settled_attempt_is_a_mismatch() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let (order_id, payment_id, charge) = paid_order(&app).await;
    let wrong = callback("charge.succeeded", "txn_more", &charge, 1, &payment_id);
    assert_eq!(app.callback_outcome(&wrong).await, "amount_mismatch");
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
}

/// A real charge of one cent made under a declined attempt's reference, then a callback
/// signed with the shop's secret that names that charge but claims the order's total: the
/// provider's amount is what was charged, so both the forged callback and the provider's
/// own are mismatches, and the order is neither paid nor shipped.
#[tokio::test]
async fn a_signed_callback_claiming_more_than_the_providers_charge_is_a_mismatch() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let declined = pay(&app, &order_id, "declined", CARD_DECLINED, &[]).await;
    assert_eq!(declined.status(), 402);
    let (payment_id, declined_charge) = attempt_of(&app, &order_id).await;
    provider
        .settings
        .set_webhook_url("http://127.0.0.1:9/nowhere");
    let cent = provider.charge(&payment_id, CARD_OK, 1).await;

    let forged = callback(
        "charge.succeeded",
        "txn_claims_all",
        &cent,
        3600,
        &payment_id,
    );
    assert_eq!(app.callback_outcome(&forged).await, "amount_mismatch");
    let honest = callback("charge.succeeded", "txn_one_cent", &cent, 1, &payment_id);
    assert_eq!(app.callback_outcome(&honest).await, "amount_mismatch");

    assert_eq!(
        attempt_of(&app, &order_id).await,
        (payment_id.clone(), declined_charge)
    );
    assert_eq!(payment_status(&app, &payment_id).await, "failed");
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(
        app.count_where("payment_callbacks", "outcome = 'amount_mismatch'")
            .await,
        2
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        0
    );
}

/// A success applied by a callback carries the provider's charge: its id and amount.
#[tokio::test]
async fn a_confirmed_callback_is_applied_with_the_providers_charge() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    let success = callback("charge.succeeded", "txn_listed", &charge, 3600, &payment_id);
    assert_eq!(app.callback_outcome(&success).await, "applied");
    assert_eq!(
        attempt_of(&app, &order_id).await,
        (payment_id.clone(), Some(charge.clone()))
    );
    let paid: serde_json::Value =
        sqlx::query_scalar("SELECT payload FROM outbox_events WHERE event_type = 'order.paid'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        (paid["charge_id"].as_str(), paid["amount_cents"].as_i64()),
        (Some(charge.as_str()), Some(3600))
    );
}
