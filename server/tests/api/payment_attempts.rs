//! One payment attempt in flight per order, and what happens to attempts whose outcome is
//! unknown: pending until the provider is asked, never guessed; settled, refunded, bounded.

use crate::helpers::*;

#[tokio::test]
async fn a_second_pay_under_another_key_while_one_is_in_flight_charges_nothing() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // The first tab pays with the slow card; 0.8 s later a second tab pays with another.
    let first = spawn_pay(&app, &order_id, "tab-1", CARD_SLOW, &[]);
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let second = pay(&app, &order_id, "tab-2", CARD_OK, &[]).await;
    assert!(second.headers().contains_key("retry-after"));
    let problem = assert_problem(second, 409, "payment-in-progress").await;
    assert_eq!(problem["retryable"], true);

    assert_eq!(first.await.unwrap().status(), 201);
    assert_eq!(
        provider.charges().await,
        1,
        "one charge in the provider's ledger"
    );
    assert_eq!(app.count("payments").await, 1);
    assert_eq!(app.order_status(&order_id).await, "paid");
    // The refused key was not stored as an outcome: once the order is paid, it says so.
    let later = pay(&app, &order_id, "tab-2", CARD_OK, &[]).await;
    assert_problem(later, 422, "order-not-payable").await;
    assert_eq!(provider.charges().await, 1);
}

#[tokio::test]
async fn the_database_refuses_a_second_pending_attempt_for_one_order() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    pending_attempt(&app, &order_id).await;
    let second = sqlx::query(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         VALUES (gen_random_uuid(), $1::uuid, 's', 'other', 3600, 'EUR')",
    )
    .bind(&order_id)
    .execute(&app.db)
    .await
    .unwrap_err();
    assert_eq!(
        second.as_database_error().unwrap().constraint(),
        Some("payments_one_pending_per_order")
    );
}

#[tokio::test]
async fn an_outcome_the_provider_does_not_know_yet_keeps_the_attempt_pending() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    for _ in 0..2 {
        let response = pay(&app, &order_id, "processing-1", CARD_PROCESSING, &[]).await;
        let problem = assert_problem(response, 503, "service-unavailable").await;
        assert_eq!(problem["retryable"], true);
    }
    assert_eq!(app.count_where("payments", "status = 'pending'").await, 1);
    assert_eq!(
        app.count_where("payments", "status = 'failed'").await,
        0,
        "never guessed declined"
    );
    assert_eq!(
        app.key_state("processing-1").await.as_deref(),
        Some("failed")
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(
        provider.charges().await,
        1,
        "the retry asked about the same charge"
    );
}

#[tokio::test]
async fn a_slow_provider_call_renews_its_lease_instead_of_being_taken_over() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let app = start(
        server::config::Config {
            idempotency_lease: std::time::Duration::from_millis(600),
            ..app.config.clone()
        },
        app.db_name.clone(),
    )
    .await;
    let order_id = place_order(&app).await;
    let first = spawn_pay(&app, &order_id, "slow-1", CARD_SLOW, &[]);
    // Well past the lease: the first request is alive, so its key is still its own.
    tokio::time::sleep(std::time::Duration::from_millis(1800)).await;
    let repeat = pay(&app, &order_id, "slow-1", CARD_SLOW, &[]).await;
    assert_problem(repeat, 409, "request-in-progress").await;
    assert_eq!(first.await.unwrap().status(), 201);
    assert_eq!(app.metric("once_idempotency_takeovers_total").await, 0);
}

#[tokio::test]
async fn a_charge_the_provider_refuses_ends_the_attempt_instead_of_blocking_the_order() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // A currency the provider does not accept: it refuses the request, charging nothing.
    app.sql(
        "UPDATE orders SET currency = 'euro' WHERE id = $1::uuid",
        &order_id,
    )
    .await;
    let refused = pay(&app, &order_id, "rejected-1", CARD_OK, &[]).await;
    let problem = assert_problem(refused, 422, "payment-not-accepted").await;
    assert_eq!(problem["retryable"], false);
    assert_eq!(
        app.count_where(
            "payments",
            "status = 'failed' AND failure_code = 'provider_rejected'"
        )
        .await,
        1,
        "never left pending"
    );
    // The order is not blocked behind a pending attempt: another intent is heard.
    let next = pay(&app, &order_id, "rejected-2", CARD_OK, &[]).await;
    assert_problem(next, 422, "payment-not-accepted").await;
    assert_eq!(provider.charges().await, 0);
}

/// A shop that settles an abandoned attempt after a short grace (provider calls time out
/// after 0.4 s, so a grace of 1 s is twice that and more).
async fn spawn_with_short_grace() -> (TestApp, TestProvider) {
    spawn_shop_and_provider_with(|c| {
        c.provider_timeout = std::time::Duration::from_millis(400);
        c.payment_settle_grace = std::time::Duration::from_millis(1000);
    })
    .await
}

#[tokio::test]
async fn after_a_503_another_card_can_pay_once_the_provider_confirms_nothing_was_charged() {
    let (app, provider) = spawn_with_short_grace().await;
    let order_id = place_order(&app).await;
    // A second instance whose provider is unreachable: the first "Pay" ends in a 503.
    let first = pay_cut_off(&app, &order_id, "card-a", CARD_OK).await;
    assert_problem(first, 503, "service-unavailable").await;
    assert_eq!(app.count_where("payments", "status = 'pending'").await, 1);

    // The shopper edits the card at once: a call for the first may still be under way.
    let too_soon = pay(&app, &order_id, "card-b", "5555555555554444", &[]).await;
    assert_problem(too_soon, 409, "payment-in-progress").await;

    // After the grace, the provider is asked, confirms no charge, and the attempt closes.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let second = pay(&app, &order_id, "card-b", "5555555555554444", &[]).await;
    assert_eq!(second.status(), 201);
    assert_eq!(provider.charges().await, 1);
    assert_eq!(
        app.count_where(
            "payments",
            "status = 'failed' AND failure_code = 'not_charged'"
        )
        .await,
        1
    );
    assert_eq!(app.order_status(&order_id).await, "paid");

    // The first key, retried at last, answers from its closed attempt and charges nothing.
    let late = pay(&app, &order_id, "card-a", CARD_OK, &[]).await;
    assert_problem(late, 422, "payment-closed").await;
    assert_eq!(provider.charges().await, 1);
}

#[tokio::test]
async fn a_charge_the_provider_reports_for_an_abandoned_attempt_is_applied_not_repeated() {
    let (app, provider) = spawn_with_short_grace().await;
    let order_id = place_order(&app).await;
    // Our attempt was charged, but its answer and its webhook were both lost.
    let abandoned = pending_attempt(&app, &order_id).await;
    provider.settings.set_webhook_url("http://127.0.0.1:9/lost");
    provider.charge(&abandoned, CARD_OK, 3600).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;

    let again = pay(&app, &order_id, "another-card", "5555555555554444", &[]).await;
    assert_problem(again, 422, "order-not-payable").await;
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(provider.charges().await, 1, "asked, never charged again");
}

#[tokio::test]
async fn a_lock_wait_past_its_bound_is_a_503_not_a_500() {
    let (app, provider) = spawn_shop_and_provider_with(|c| {
        c.db_limits.lock_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let order_id = place_order(&app).await;
    let paying = spawn_pay(
        &app,
        &order_id,
        "locked-1",
        CARD_OK,
        &[("once-test-hold", "lock")],
    );
    app.wait_until_held("lock", 1).await;
    let payment_id: String = sqlx::query_scalar("SELECT id::text FROM payments")
        .fetch_one(&app.db)
        .await
        .unwrap();
    // The held payment holds its rows' locks; a callback for its charge waits past the bound.
    let charge = provider.charge_id_for(&payment_id).await;
    let waiting = callback("charge.succeeded", "txn_locked", &charge, 3600, &payment_id);
    let response = app
        .send_callback(&waiting, chrono::Utc::now().timestamp())
        .await;
    let problem = assert_problem(response, 503, "service-unavailable").await;
    assert_eq!(problem["retryable"], true);
    app.open_gate("lock").await;
    assert_eq!(paying.await.unwrap().status(), 201);
}

#[tokio::test]
async fn a_success_the_order_can_no_longer_take_answers_refund_due_to_the_payer() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let paying = spawn_pay(&app, &order_id, "late-1", CARD_SLOW, &[]);
    // While the slow charge is under way, the order is paid by other means.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    app.sql(
        "UPDATE orders SET status = 'paid' WHERE id = $1::uuid",
        &order_id,
    )
    .await;
    let answer = paying.await.unwrap();
    let problem = assert_problem(answer, 422, "order-not-payable").await;
    assert!(problem["detail"].as_str().unwrap().contains("refunded"));
    assert_eq!(provider.charges().await, 1);
    assert_eq!(
        app.count_where("payments", "status = 'refund_due'").await,
        1
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'payment.refund_due'")
            .await,
        1
    );
}

#[tokio::test]
async fn an_attempt_stamped_by_a_charge_call_is_never_closed_as_never_charged() {
    use server::payments::store;
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id: uuid::Uuid = pending_attempt(&app, &order_id).await.parse().unwrap();
    let grace = std::time::Duration::from_millis(1000);
    // Quiet for long: a settling intent decided, from what it saw, to close it…
    backdate_attempt(&app, &payment_id.to_string(), 1).await;
    let seen = store::blocker(&app.db, order_id.parse().unwrap(), grace, (grace, grace))
        .await
        .unwrap()
        .unwrap();
    assert!(seen.quiet && !seen.running);
    // …but the owner's retry stamped a charge call after that: the close must see it.
    assert!(store::stamp_charge_call(&app.db, payment_id).await.unwrap());
    let mut tx = app.db.begin().await.unwrap();
    let closed = store::close_never_charged(&mut tx, payment_id, grace, "not_charged")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(
        !closed,
        "a call may be under way: the attempt stays pending"
    );
    assert_eq!(app.count_where("payments", "status = 'pending'").await, 1);
}

/// A shop whose provider calls time out after 0.1 s: a payment with the slow card (charged
/// after 3 s) answers 503 first. The shop's own four calls, with their jittered pauses
/// (at most 0.4 + 0.8 + 1.6 s), end before the charge is made but in about 1 of 3,000
/// runs.
async fn spawn_with_a_slow_provider() -> (TestApp, TestProvider) {
    spawn_shop_and_provider_with(|c| {
        c.provider_timeout = std::time::Duration::from_millis(100);
        // Past the sandbox's slow charge, made within 4 s of its call or never: an
        // attempt is not closed as never charged while its charge may still land.
        c.payment_settle_grace = std::time::Duration::from_millis(5000);
    })
    .await
}

/// The same shop and database with a provider that never answers: what a retry there gets
/// is what the shop already knows, not a new call.
/// Pays `order_id` with the shopper's session on a second instance of the shop whose provider
/// is unreachable.
async fn pay_cut_off(app: &TestApp, order_id: &str, key: &str, card: &str) -> reqwest::Response {
    let cut_off = cut_off_from_the_provider(app).await;
    app.client
        .post(cut_off.url(&format!("/api/orders/{order_id}/payments")))
        .header("idempotency-key", key)
        .json(&serde_json::json!({ "card_number": card }))
        .send()
        .await
        .unwrap()
}

async fn cut_off_from_the_provider(app: &TestApp) -> TestApp {
    let config = server::config::Config {
        provider_url: "http://127.0.0.1:9".into(),
        ..app.config.clone()
    };
    start(config, app.db_name.clone()).await
}

#[tokio::test]
async fn a_slow_card_s_retry_after_its_webhook_answers_the_outcome_without_asking_again() {
    let (app, provider) = spawn_with_a_slow_provider().await;
    let order_id = place_order(&app).await;
    let first = pay(&app, &order_id, "slow-a", CARD_SLOW, &[]).await;
    assert_problem(first, 503, "service-unavailable").await;
    // The provider finishes the charge after its 3 s; its webhook pays the order.
    eventually("the webhook paid the order", || async {
        app.order_status(&order_id).await == "paid"
    })
    .await;

    // The retry, on an instance that cannot reach the provider, answers the known outcome.
    let retry = pay_cut_off(&app, &order_id, "slow-a", CARD_SLOW).await;
    assert_eq!(retry.status(), 201);
    assert_eq!(provider.charges().await, 1);
}

#[tokio::test]
async fn a_slow_card_s_retry_with_its_webhook_lost_gets_the_charge_from_the_provider() {
    let (app, provider) = spawn_with_a_slow_provider().await;
    provider.settings.set_webhook_url("http://127.0.0.1:9/lost");
    let order_id = place_order(&app).await;
    let first = pay(&app, &order_id, "slow-b", CARD_SLOW, &[]).await;
    assert_problem(first, 503, "service-unavailable").await;
    eventually("the provider made the charge", || async {
        provider.charges().await == 1
    })
    .await;

    // No webhook came: the retry asks the provider under the same key, which answers from
    // the charge it made, at once (a slow card is slow only the first time).
    let retry = pay(&app, &order_id, "slow-b", CARD_SLOW, &[]).await;
    assert_eq!(retry.status(), 201);
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(provider.charges().await, 1);
}

#[tokio::test]
async fn a_new_attempt_commits_with_its_first_call_stamped_and_each_later_call_stamps_its_own() {
    let (app, provider) = spawn_shop_and_provider().await;
    let stamps = |order_id: String| {
        let app = &app;
        async move { count(&story(app, &order_id).await, "provider_call") }
    };
    // Paid at the first call: that call's stamp is the attempt's own, in the commit that
    // recorded it (no second statement), and the journal still tells the call.
    let paid = place_order(&app).await;
    assert_eq!(
        pay(&app, &paid, "at-once", CARD_OK, &[]).await.status(),
        201
    );
    assert_eq!(stamps(paid.clone()).await, 1);
    assert_eq!(
        app.count_where(
            "payments",
            "status = 'succeeded' AND charge_requested_at >= created_at"
        )
        .await,
        1
    );

    // The provider unreachable: every try after the first stamps its own call…
    let retried = place_order(&app).await;
    let first = pay_cut_off(&app, &retried, "retried", CARD_OK).await;
    assert_problem(first, 503, "service-unavailable").await;
    let tries = stamps(retried.clone()).await;
    assert!(tries > 1, "one stamp per try, {tries} stamps");
    // …and so does the same request retried later, where the provider answers.
    assert_eq!(
        pay(&app, &retried, "retried", CARD_OK, &[]).await.status(),
        201
    );
    assert_eq!(stamps(retried.clone()).await, tries + 1);
    assert_eq!(provider.charges().await, 2);
}

#[tokio::test]
async fn a_new_attempt_that_waited_for_its_order_is_stamped_when_written_not_when_asked() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    // Another transaction holds the order's row, as a payment of another tab applying its
    // success would: the attempt's INSERT waits for it.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM orders WHERE id = $1::uuid FOR NO KEY UPDATE")
        .bind(&order_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let paying = spawn_pay(&app, &order_id, "waited", CARD_OK, &[]);
    eventually(
        "the attempt's INSERT waits for the order's lock",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&app.db)
            .await
            .unwrap()
                == 1
        },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    holder.commit().await.unwrap();
    assert_eq!(paying.await.unwrap().status(), 201);
    // The stamp is after the wait: stamped at the statement's start, the attempt would be
    // seconds closer to looking quiet before its first call had even begun.
    let waited: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM charge_requested_at - created_at)::float8 FROM payments
          WHERE order_id = $1::uuid",
    )
    .bind(&order_id)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(
        waited >= 1.0,
        "stamped {waited} s after the statement began"
    );
}
