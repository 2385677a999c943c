//! What a callback does when it cannot simply be applied: a success the order can no longer
//! take is `refund_due`, a late success is honoured while the order is payable, and a callback
//! that could never succeed is recorded and acknowledged, never retried forever.

use crate::helpers::*;

#[tokio::test]
async fn a_success_for_an_order_already_paid_is_refund_due_not_a_second_success() {
    let (app, provider) = spawn_shop_and_provider().await;
    let (order_id, _, _) = paid_order(&app).await;
    // Another attempt's charge went through too (a double charge, however it happened).
    let other = pending_attempt(&app, &order_id).await;
    let double = provider.unannounced_charge(&other).await;
    let late = callback("charge.succeeded", "txn_double", &double, 3600, &other);
    assert_eq!(app.callback_outcome(&late).await, "refund_due");
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
    assert_eq!(
        app.count_where(
            "payments",
            &format!("status = 'refund_due' AND provider_charge_id = '{double}'")
        )
        .await,
        1
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'payment.refund_due'")
            .await,
        1
    );
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
    // Its duplicate changes nothing.
    app.send_callback(&late, now()).await;
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'payment.refund_due'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_success_for_a_cancelled_order_is_refund_due() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    app.sql(
        "UPDATE orders SET status = 'cancelled' WHERE id = $1::uuid",
        &order_id,
    )
    .await;
    let success = callback("charge.succeeded", "txn_c", &charge, 3600, &payment_id);
    assert_eq!(app.callback_outcome(&success).await, "refund_due");
    assert_eq!(app.order_status(&order_id).await, "cancelled");
    assert_eq!(
        app.count_where("payments", "status = 'refund_due'").await,
        1
    );
}

#[tokio::test]
async fn a_late_success_after_a_timeout_failure_is_honoured_while_the_order_is_payable() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let charge = provider.unannounced_charge(&payment_id).await;
    app.sql(
        "UPDATE payments SET status = 'failed', failure_code = 'timeout' WHERE id = $1::uuid",
        &payment_id,
    )
    .await;
    let late = callback("charge.succeeded", "txn_l", &charge, 3600, &payment_id);
    assert_eq!(app.callback_outcome(&late).await, "applied");
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(app.count_where("payments", "status = 'succeeded'").await, 1);
}

#[tokio::test]
async fn callbacks_that_could_never_succeed_are_recorded_and_acknowledged() {
    let (app, provider) = spawn_shop_and_provider().await;
    // A kind of event the shop does not act on, with a data shape of its own.
    let unknown = serde_json::json!({
        "id": "evt_dispute", "type": "charge.dispute.created", "tx_no": "txn_dispute",
        "created": now(), "data": { "dispute": "dp_1" }
    });
    assert_eq!(app.callback_outcome(&unknown).await, "ignored");
    assert_eq!(
        app.count_where("payment_callbacks", "outcome = 'ignored'")
            .await,
        1
    );

    // A success whose charge id another attempt already holds: the database refuses it.
    let order_id = place_order(&app).await;
    let earlier = pending_attempt(&app, &order_id).await;
    app.sql(
        "UPDATE payments SET status = 'failed' WHERE id = $1::uuid",
        &earlier,
    )
    .await;
    let payment_id = pending_attempt(&app, &order_id).await;
    let taken = provider.unannounced_charge(&payment_id).await;
    sqlx::query("UPDATE payments SET provider_charge_id = $2 WHERE id = $1::uuid")
        .bind(&earlier)
        .bind(&taken)
        .execute(&app.db)
        .await
        .unwrap();
    let clash = callback("charge.succeeded", "txn_clash", &taken, 3600, &payment_id);
    assert_eq!(app.callback_outcome(&clash).await, "conflict");
    assert_eq!(
        app.count_where("payment_callbacks", "outcome = 'conflict'")
            .await,
        1
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");

    // A decline for an attempt we never made, and one for an attempt already settled.
    let stranger = uuid::Uuid::new_v4().to_string();
    let unknown_decline = callback("charge.failed", "txn_nobody", "ch_nobody", 3600, &stranger);
    assert_eq!(
        app.callback_outcome(&unknown_decline).await,
        "unknown_payment"
    );
    let settled_decline = callback("charge.failed", "txn_settled", "ch_s", 3600, &earlier);
    assert_eq!(
        app.callback_outcome(&settled_decline).await,
        "already_applied"
    );

    // A known kind whose data has another shape: signed by the provider, so recorded.
    let malformed = serde_json::json!({
        "id": "evt_odd", "type": "charge.succeeded", "tx_no": "txn_odd",
        "created": now(), "data": { "charge": "ch_odd" }
    });
    assert_eq!(app.callback_outcome(&malformed).await, "malformed");

    // Outcome names are a closed list in the database too.
    let bad = sqlx::query("UPDATE payment_callbacks SET outcome = 'whatever'")
        .execute(&app.db)
        .await
        .unwrap_err();
    assert_eq!(
        bad.as_database_error().unwrap().constraint(),
        Some("payment_callbacks_outcome_valid")
    );
}
