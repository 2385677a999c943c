//! Bounds per client over all its sessions: a client that opens session after session
//! neither stores a row per read nor fills the orders table with orders nobody pays
//! (docs/design.md, "Hostile traffic"). Clients are told apart by their real addresses on
//! the loopback (`shopper_from`).

use std::sync::Arc;

use crate::helpers::*;

const FIRST: [u8; 4] = [127, 0, 0, 2];
const SECOND: [u8; 4] = [127, 0, 0, 3];

async fn sessions_stored(app: &TestApp) -> i64 {
    app.count("tower_sessions.session").await
}

#[tokio::test]
async fn a_client_opens_at_most_its_hourly_sessions_and_one_it_holds_keeps_working() {
    let app = spawn_app_with(|c| c.limits.new_sessions_per_client_per_hour = 2).await;
    // The test's own client opened one from 127.0.0.1 at the start.
    let before = sessions_stored(&app).await;
    let holder = shopper_from(FIRST);
    app.open_session(&holder).await;
    app.open_session(&shopper_from(FIRST)).await;
    let refused = shopper_from(FIRST)
        .get(app.url("/api/products"))
        .send()
        .await
        .unwrap();
    assert!(refused.headers().get("set-cookie").is_none());
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    assert_problem(refused, 429, "rate-limited").await;
    assert_eq!(
        sessions_stored(&app).await,
        before + 2,
        "the refused read stored none"
    );

    let page = holder.get(app.url("/")).send().await.unwrap();
    assert_eq!(
        page.status(),
        200,
        "a session the client holds is no new one"
    );
    app.open_session(&shopper_from(SECOND)).await;
    assert_eq!(
        sessions_stored(&app).await,
        before + 3,
        "another client has its own"
    );
}

/// Three sessions of one client, one order each, against a client quota of two; the
/// sessions' own quota is far from reached.
#[tokio::test]
async fn a_client_waits_for_payment_on_at_most_its_quota_of_orders_over_all_its_sessions() {
    let app = spawn_app_with(|c| {
        c.limits.pending_orders = 5;
        c.limits.pending_orders_per_client = 2;
    })
    .await;
    let mut tabs = Vec::new();
    for _ in 0..3 {
        let tab = shopper_from(FIRST);
        app.open_session(&tab).await;
        tabs.push(tab);
    }
    for (i, tab) in tabs[..2].iter().enumerate() {
        let placed = post_order(tab, &app, Some(&format!("o-{i}")), MUG_ORDER).await;
        assert_eq!(placed.status(), 201);
    }
    let refused = post_order(&tabs[2], &app, Some("o-2"), MUG_ORDER).await;
    assert_eq!(refused.headers()["retry-after"], "60");
    let problem = assert_problem(refused, 429, "client-pending-order-quota").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("your network"),
        "{problem}"
    );
    assert_eq!(app.count("orders").await, 2);
    assert_ne!(app.key_state("o-2").await.as_deref(), Some("completed"));

    let other = shopper_from(SECOND);
    app.open_session(&other).await;
    let elsewhere = post_order(&other, &app, Some("o-other"), MUG_ORDER).await;
    assert_eq!(elsewhere.status(), 201, "another client has its own places");

    // A cancelled order frees its place, and keeps no address.
    let first: serde_json::Value = post_order(&tabs[0], &app, Some("o-0"), MUG_ORDER)
        .await
        .json()
        .await
        .unwrap();
    let cancelled = tabs[0]
        .post(app.url(&format!(
            "/api/orders/{}/cancel",
            first["id"].as_str().unwrap()
        )))
        .header("idempotency-key", "cancel-o-0")
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    let retried = post_order(&tabs[2], &app, Some("o-2"), MUG_ORDER).await;
    assert_eq!(
        retried.status(),
        201,
        "the same request, once a place is free"
    );
    assert_eq!(
        app.count_where("orders", "status = 'cancelled' AND client_bucket IS NULL")
            .await,
        1
    );
    assert_eq!(
        app.count_where("orders", "client_bucket = '127.0.0.2'")
            .await,
        2,
        "the waiting orders name their client's bucket"
    );
}

/// Cancelling an order frees its pending place, not its place in the client's hour: one
/// client making and cancelling orders through many sessions and two instances makes at
/// most its hourly quota, then is told when to come back, and nothing of the refused
/// request is stored (seen red without the hourly count: the fourth order was made).
#[tokio::test]
async fn a_client_that_cancels_each_order_still_makes_at_most_its_hourly_quota() {
    let app = spawn_app_with(|c| {
        c.limits.pending_orders_per_client = 1;
        c.limits.orders_per_client_per_hour = 3;
    })
    .await;
    let second = start(app.config.clone(), app.db_name.clone()).await;
    for (i, instance) in [&app, &second, &app].into_iter().enumerate() {
        let tab = shopper_from(FIRST);
        instance.open_session(&tab).await;
        let placed = post_order(&tab, instance, Some(&format!("h-{i}")), MUG_ORDER).await;
        assert_eq!(placed.status(), 201);
        let order: serde_json::Value = placed.json().await.unwrap();
        let cancelled = tab
            .post(instance.url(&format!(
                "/api/orders/{}/cancel",
                order["id"].as_str().unwrap()
            )))
            .header("idempotency-key", format!("cancel-h-{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(cancelled.status(), 200);
    }
    let tab = shopper_from(FIRST);
    second.open_session(&tab).await;
    let refused = post_order(&tab, &second, Some("h-3"), MUG_ORDER).await;
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3500..=3600).contains(&wait), "Retry-After {wait}");
    let problem = assert_problem(refused, 429, "client-hourly-order-quota").await;
    assert!(problem["detail"].as_str().unwrap().contains("last hour"));
    assert_eq!(app.count("orders").await, 3);
    assert_ne!(app.key_state("h-3").await.as_deref(), Some("completed"));
    assert_eq!(app.count("client_orders").await, 3);

    let other = shopper_from(SECOND);
    app.open_session(&other).await;
    let elsewhere = post_order(&other, &app, Some("h-other"), MUG_ORDER).await;
    assert_eq!(elsewhere.status(), 201, "another client has its own hour");

    // An hour later the client's orders leave its count, and the retention round forgets
    // them; the same request is then made.
    sqlx::query(
        "UPDATE client_orders SET created_at = created_at - interval '1 hour'
          WHERE client_bucket = '127.0.0.2'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    server::orders::store::forget_client_orders(&app.db)
        .await
        .unwrap();
    assert_eq!(app.count("client_orders").await, 1, "the other client's");
    let retried = post_order(&tab, &second, Some("h-3"), MUG_ORDER).await;
    assert_eq!(retried.status(), 201);
}

/// Ten sessions of one client order at the same instant (a barrier) against a client quota
/// of three: the database counts them one after another, so exactly three are made.
#[tokio::test]
async fn simultaneous_orders_of_one_clients_sessions_cannot_pass_its_quota() {
    let app = spawn_app_with(|c| c.limits.pending_orders_per_client = 3).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(10));
    let mut sessions = Vec::new();
    for _ in 0..10 {
        let tab = shopper_from(FIRST);
        app.open_session(&tab).await;
        sessions.push(tab);
    }
    let orders: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, tab)| {
            let request = tab
                .post(app.url("/api/orders"))
                .header("content-type", "application/json")
                .header("idempotency-key", format!("tab-{i}"))
                .body(MUG_ORDER);
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                request.send().await.unwrap().status().as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for order in orders {
        statuses.push(order.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 7);
    assert_eq!(app.count("orders").await, 3);
}

/// The checkout's two doors count the same: with a client quota of one, a second session
/// of the client is sent back by the form with the reason, and refused by the hydrated
/// page's API.
#[tokio::test]
async fn the_checkout_counts_against_the_clients_quota_through_either_door() {
    let app = spawn_app_with(|c| c.limits.pending_orders_per_client = 1).await;
    let mut tabs = Vec::new();
    for _ in 0..3 {
        let tab = shopper_from(FIRST);
        app.open_session(&tab).await;
        add_mugs(&app, &tab).await;
        tabs.push(tab);
    }
    let key = page_key(&app, &tabs[0]).await;
    let placed = location(
        &form_request(&app, &tabs[0], &key, None)
            .send()
            .await
            .unwrap(),
    );
    assert!(placed.starts_with("/orders/"), "{placed}");

    let key = page_key(&app, &tabs[1]).await;
    let sent_back = location(
        &form_request(&app, &tabs[1], &key, None)
            .send()
            .await
            .unwrap(),
    );
    assert!(
        sent_back.contains("problem=client-pending-order-quota"),
        "{sent_back}"
    );
    let key = page_key(&app, &tabs[2]).await;
    let refused = tabs[2]
        .post(app.url("/api/checkout"))
        .header("idempotency-key", key)
        .json(&details())
        .send()
        .await
        .unwrap();
    assert_problem(refused, 429, "client-pending-order-quota").await;
    assert_eq!(app.count("orders").await, 1);
}

/// A read another site's page embeds (an image of the shop) opens no session, so no page
/// elsewhere can spend the allowance of its visitors' address; a link followed from
/// there (a navigation) opens one as always.
#[tokio::test]
async fn a_read_another_site_embeds_opens_no_session() {
    let app = spawn_app_with(|c| c.limits.new_sessions_per_client_per_hour = 1).await;
    let before = sessions_stored(&app).await;
    let browser = shopper_from(FIRST);
    let embed = |mode: &'static str| {
        browser
            .get(app.url("/"))
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", mode)
            .send()
    };
    for _ in 0..3 {
        let embedded = embed("no-cors").await.unwrap();
        assert!(embedded.headers().get("set-cookie").is_none());
        assert_problem(embedded, 403, "cross-site-request").await;
    }
    assert_eq!(sessions_stored(&app).await, before);
    let followed = embed("navigate").await.unwrap();
    assert_eq!(followed.status(), 200, "the allowance was still whole");
    assert_eq!(sessions_stored(&app).await, before + 1);
}
