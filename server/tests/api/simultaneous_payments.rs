//! Several tabs paying one order at the same instant, each with its own key: the provider
//! charges the order once, and every other intent is refused before anything is charged.

use std::sync::Arc;

use tokio::sync::Barrier;

use crate::helpers::*;

const ORDERS: usize = 20;
const TABS: usize = 5;

/// Payments of `order_id` by the tabs in `tabs`, each under its own key, sent together: every
/// request waits at one barrier (not a sleep) until all are ready.
fn pay_together(
    app: &TestApp,
    order_id: &str,
    tabs: std::ops::Range<usize>,
) -> Vec<tokio::task::JoinHandle<reqwest::Response>> {
    let barrier = Arc::new(Barrier::new(tabs.len()));
    tabs.map(|tab| {
        let key = format!("tab-{tab}-{order_id}");
        let request = pay_request(app, order_id, &key, CARD_OK, &[]);
        let barrier = barrier.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            request.send().await.unwrap()
        })
    })
    .collect()
}

/// Releases `TABS` payments of one order together; returns their statuses with the problem
/// type of each refusal.
async fn pay_from_every_tab_at_once(app: &TestApp, order_id: &str) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    for tab in pay_together(app, order_id, 0..TABS) {
        let response = tab.await.unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let kind = body["type"].as_str().unwrap_or_default();
        answers.push((
            status,
            kind.rsplit('/').next().unwrap_or_default().to_owned(),
        ));
    }
    answers
}

#[tokio::test]
async fn five_tabs_paying_one_order_at_once_are_charged_once() {
    let (app, provider) = spawn_shop_and_provider().await;
    for _ in 0..ORDERS {
        let order_id = place_order(&app).await;
        let answers = pay_from_every_tab_at_once(&app, &order_id).await;
        let paid = answers.iter().filter(|(status, _)| *status == 201).count();
        assert_eq!(paid, 1, "one tab pays the order: {answers:?}");
        for (status, kind) in answers.iter().filter(|(status, _)| *status != 201) {
            assert!(
                matches!(
                    (*status, kind.as_str()),
                    (409, "payment-in-progress") | (422, "order-not-payable")
                ),
                "every other tab is told another payment has it: {answers:?}"
            );
        }
        let charged = provider.charges_for_order(&app, &order_id).await;
        assert_eq!(
            charged, 1,
            "one charge at the provider for order {order_id}"
        );
        assert_eq!(app.order_status(&order_id).await, "paid");
    }
    assert_eq!(provider.charges().await, ORDERS as i64);
    assert_eq!(
        app.count_where("payments", "status = 'refund_due'").await,
        0
    );
}

/// The moment the race needs, made certain: one tab's success is written but not committed
/// (held at a gate in its final transaction) while the other tabs' attempts are released
/// together and wait on it. When it commits they must see the order paid, not take the
/// place its no longer pending attempt left, and charge again.
#[tokio::test]
async fn tabs_that_arrive_while_a_success_commits_are_told_the_order_is_paid() {
    let (app, provider) = spawn_shop_and_provider().await;
    for round in 0..3 {
        let order_id = place_order(&app).await;
        let gate = format!("success-{round}");
        let first = spawn_pay(
            &app,
            &order_id,
            &format!("first-{order_id}"),
            CARD_OK,
            &[("once-test-hold", &gate)],
        );
        app.wait_until_held(&gate, 1).await;
        let others = pay_together(&app, &order_id, 1..TABS);
        // (The provider's callback for the held charge waits on it too: count the attempts.)
        eventually(
            "the other tabs' attempts wait on the held success",
            || async {
                app.count_where(
                    "pg_stat_activity",
                    "datname = current_database() AND wait_event_type = 'Lock'
                 AND query LIKE '%INSERT INTO payments%'",
                )
                .await
                    == (TABS - 1) as i64
            },
        )
        .await;
        app.open_gate(&gate).await;
        assert_eq!(first.await.unwrap().status(), 201);
        let mut answers = Vec::new();
        for other in others {
            answers.push(other.await.unwrap());
        }
        assert_eq!(provider.charges().await, round + 1, "one charge per order");
        for answer in answers {
            assert_problem(answer, 422, "order-not-payable").await;
        }
        assert_eq!(
            app.count_where("payments", &format!("order_id = '{order_id}'"))
                .await,
            1,
            "no attempt but the paid one"
        );
    }
}
