//! Cancelling (docs/design.md, "Cancelling and expiry"): a shopper cancels an unpaid order
//! once per key; a paid order, an order with a payment in flight and another session's order
//! are not cancelled; a cancel and a payment sent at the same instant never both win; the
//! shop cancels what nobody paid in time, in the journal as the expiry; and no code path
//! can move an order backwards.

use std::{sync::Arc, time::Duration};

use tokio::sync::Barrier;

use crate::helpers::*;

fn cancel_request(app: &TestApp, order_id: &str, key: &str) -> reqwest::RequestBuilder {
    app.client
        .post(app.url(&format!("/api/orders/{order_id}/cancel")))
        .header("idempotency-key", key)
}

async fn cancel(app: &TestApp, order_id: &str, key: &str) -> reqwest::Response {
    cancel_request(app, order_id, key).send().await.unwrap()
}

async fn status_changes(app: &TestApp, order_id: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT summary, actor FROM order_journal WHERE order_id = $1::uuid AND kind = 'status'
          ORDER BY at, id",
    )
    .bind(order_id)
    .fetch_all(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_shopper_cancels_an_unpaid_order_once_and_it_can_no_longer_be_paid() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let first = cancel(&app, &order_id, "cancel-1").await;
    assert_eq!(first.status(), 200);
    let order: serde_json::Value = first.json().await.unwrap();
    assert_eq!(order["status"], "cancelled");
    let repeat = cancel(&app, &order_id, "cancel-1").await;
    assert_eq!(repeat.status(), 200);
    assert_eq!(repeat.headers()["idempotent-replayed"], "true");
    // Another tab's cancel, with its own key: the order is cancelled, as it asked.
    assert_eq!(cancel(&app, &order_id, "cancel-2").await.status(), 200);
    assert_eq!(app.order_status(&order_id).await, "cancelled");
    assert_eq!(
        status_changes(&app, &order_id).await.last().unwrap(),
        &(
            "order pending_payment → cancelled".to_owned(),
            "shop".to_owned()
        )
    );
    assert_eq!(
        app.count_where("order_journal", "summary LIKE '%→ cancelled'")
            .await,
        1,
        "cancelled once"
    );
    assert_problem(
        pay(&app, &order_id, "pay-after", CARD_OK, &[]).await,
        422,
        "order-not-payable",
    )
    .await;
    assert_eq!(app.count("payments").await, 0, "nothing charged");
}

#[tokio::test]
async fn a_paid_order_an_order_being_paid_and_anothers_order_are_not_cancelled() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let (paid, _, _) = paid_order(&app).await;
    assert_problem(
        cancel(&app, &paid, "cancel-paid").await,
        422,
        "order-not-cancellable",
    )
    .await;
    assert_eq!(app.order_status(&paid).await, "paid");

    let being_paid = place_order(&app).await;
    pending_attempt(&app, &being_paid).await;
    assert_problem(
        cancel(&app, &being_paid, "cancel-busy").await,
        409,
        "payment-in-progress",
    )
    .await;
    assert_eq!(app.order_status(&being_paid).await, "pending_payment");
    // Once the attempt has settled as failed, the same key cancels.
    app.sql("UPDATE payments SET status = 'failed', failure_code = 'declined' WHERE order_id = $1::uuid", &being_paid)
        .await;
    assert_eq!(cancel(&app, &being_paid, "cancel-busy").await.status(), 200);

    let someone_elses = place_order(&app).await;
    let stranger = shopper();
    app.open_session(&stranger).await;
    let refused = stranger
        .post(app.url(&format!("/api/orders/{someone_elses}/cancel")))
        .header("idempotency-key", "cancel-stranger")
        .send()
        .await
        .unwrap();
    assert_problem(refused, 404, "not-found").await;
    assert_eq!(app.order_status(&someone_elses).await, "pending_payment");
}

/// A cancel and five payments released together, each with its own key, on twenty orders:
/// an order ends paid or cancelled, never both, and a cancelled order was charged nothing.
#[tokio::test]
async fn a_cancel_and_payments_at_the_same_instant_never_both_win() {
    let (app, provider) = spawn_shop_and_provider().await;
    for round in 0..20 {
        let order_id = place_order(&app).await;
        let barrier = Arc::new(Barrier::new(6));
        let mut requests = vec![cancel_request(&app, &order_id, &format!("cancel-{round}"))];
        for tab in 0..5 {
            requests.push(pay_request(
                &app,
                &order_id,
                &format!("pay-{round}-{tab}"),
                CARD_OK,
                &[],
            ));
        }
        let answers: Vec<_> = requests
            .into_iter()
            .map(|request| {
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    request.send().await.unwrap().status().as_u16()
                })
            })
            .collect();
        let mut statuses = vec![];
        for answer in answers {
            statuses.push(answer.await.unwrap());
        }
        let status = app.order_status(&order_id).await;
        let charged = provider.charges_for_order(&app, &order_id).await;
        match status.as_str() {
            "paid" => {
                assert_eq!(charged, 1, "{statuses:?}");
                assert!(
                    [409, 422].contains(&statuses[0]),
                    "the cancel lost: {statuses:?}"
                );
            }
            "cancelled" => {
                assert_eq!(charged, 0, "a cancelled order charged: {statuses:?}");
                assert_eq!(statuses[0], 200, "{statuses:?}");
            }
            other => panic!("order {other} after {statuses:?}"),
        }
    }
}

#[tokio::test]
async fn orders_nobody_paid_in_time_are_cancelled_by_the_expiry_and_nothing_else_is() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let (paid, _, _) = paid_order(&app).await;
    let unpaid = place_order(&app).await;
    let being_paid = place_order(&app).await;
    pending_attempt(&app, &being_paid).await;
    let recent = place_order(&app).await;
    app.sql(
        "UPDATE orders SET created_at = now() - interval '3 hours' WHERE id <> $1::uuid",
        &recent,
    )
    .await;

    let expiry = Duration::from_secs(7200);
    let cancelled = server::orders::cancel::expire_unpaid(&app.db, expiry)
        .await
        .unwrap();
    assert_eq!(cancelled, 1);
    assert_eq!(app.order_status(&unpaid).await, "cancelled");
    assert_eq!(
        app.order_status(&being_paid).await,
        "pending_payment",
        "a payment in flight"
    );
    assert_eq!(
        app.order_status(&recent).await,
        "pending_payment",
        "not due yet"
    );
    assert_eq!(app.order_status(&paid).await, "paid");
    assert_eq!(
        status_changes(&app, &unpaid).await.last().unwrap(),
        &(
            "order pending_payment → cancelled".to_owned(),
            "expiry".to_owned()
        ),
        "written in the order's journal, by the expiry"
    );
    assert_eq!(
        server::orders::cancel::expire_unpaid(&app.db, expiry)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn an_order_never_moves_backwards_whoever_writes_it() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    app.sql(
        "UPDATE orders SET status = 'cancelled' WHERE id = $1::uuid",
        &order_id,
    )
    .await;
    for backwards in ["pending_payment", "paid", "fulfilled"] {
        let refused = sqlx::query("UPDATE orders SET status = $2 WHERE id = $1::uuid")
            .bind(&order_id)
            .bind(backwards)
            .execute(&app.db)
            .await
            .unwrap_err();
        let constraint = refused.as_database_error().and_then(|e| e.constraint());
        assert_eq!(
            constraint,
            Some("orders_status_moves_forward"),
            "{backwards}"
        );
    }
    assert_eq!(app.order_status(&order_id).await, "cancelled");
}
