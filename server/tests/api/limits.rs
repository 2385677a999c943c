//! Bounded resources per client: rate limits (429 with Retry-After) and quotas on what one
//! session stores. The bounds on connections are in `connections.rs`.

use std::time::Duration;

use server::config::Rate;

use crate::helpers::*;

const OFF: Rate = Rate {
    per_second: 0,
    burst: 0,
};

/// A session may write twice at once, then once a second; clients are not limited.
fn two_writes_at_once(config: &mut server::config::Config) {
    config.limits.per_client = OFF;
    config.limits.writes_per_session = Rate {
        per_second: 1,
        burst: 2,
    };
}

async fn assert_rate_limited(response: reqwest::Response) {
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    let body = assert_problem(response, 429, "rate-limited").await;
    assert_eq!(body["retryable"], true);
}

#[tokio::test]
async fn a_client_past_its_rate_is_told_when_to_come_back() {
    let app = spawn_app_with(|c| {
        c.limits.per_client = Rate {
            per_second: 1,
            burst: 3,
        };
    })
    .await;
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(
            app.client
                .get(app.url("/api/products"))
                .send()
                .await
                .unwrap(),
        );
    }
    let refused: Vec<_> = answers.into_iter().filter(|r| r.status() == 429).collect();
    assert!(
        !refused.is_empty(),
        "five reads at once against a burst of three"
    );
    for response in refused {
        assert_rate_limited(response).await;
    }
}

#[tokio::test]
async fn a_session_past_its_write_rate_stores_nothing_more() {
    let app = spawn_app_with(two_writes_at_once).await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let response = post_order(&app.client, &app, Some(&format!("w-{i}")), MUG_ORDER).await;
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert_rate_limited(response).await;
        }
    }
    assert_eq!(&statuses[..2], [201, 201], "{statuses:?}");
    assert!(statuses[2..].contains(&429), "{statuses:?}");
    let created = statuses.iter().filter(|s| **s == 201).count() as i64;
    assert_eq!(app.count("orders").await, created);
    assert_eq!(app.count("idempotency_keys").await, created);
    // Another shopper has a bucket of its own.
    let other = shopper();
    app.open_session(&other).await;
    let response = post_order(&other, &app, Some("other-1"), MUG_ORDER).await;
    assert_eq!(response.status(), 201);
}

/// `X-Forwarded-For` names the client only when a trusted proxy sent it: anyone else
/// could write any address there and get a fresh bucket with each.
#[tokio::test]
async fn only_a_trusted_proxy_names_the_client() {
    let one_at_a_time = Rate {
        per_second: 1,
        burst: 1,
    };
    let read_as = |app: &TestApp, client: &'static str| {
        reqwest::Client::new()
            .get(app.url("/healthz"))
            .header("x-forwarded-for", client)
            .send()
    };
    let direct = spawn_app_with(|c| c.limits.per_client = one_at_a_time).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        read_as(&direct, "198.51.100.1").await.unwrap().status(),
        200
    );
    assert_eq!(
        read_as(&direct, "198.51.100.2").await.unwrap().status(),
        429
    );

    let proxied = spawn_app_with(|c| {
        c.limits.per_client = one_at_a_time;
        c.limits.trusted_proxies = server::client_addr::TrustedProxies::parse("127.0.0.1").unwrap();
    })
    .await;
    assert_eq!(
        read_as(&proxied, "198.51.100.1").await.unwrap().status(),
        200
    );
    assert_eq!(
        read_as(&proxied, "198.51.100.2").await.unwrap().status(),
        200
    );
    assert_eq!(
        read_as(&proxied, "198.51.100.1").await.unwrap().status(),
        429
    );
}

/// On a dual-stack listener, IPv4 clients arrive as `::ffff:a.b.c.d`: each is still a
/// client of its own (seen red when they all counted in the /64 `::`).
#[tokio::test]
async fn ipv4_clients_of_a_dual_stack_listener_are_counted_apart() {
    let app = spawn_app_with(|c| {
        dual_stack(c);
        c.limits.per_client = Rate {
            per_second: 1,
            burst: 1,
        };
    })
    .await;
    let healthz = |client: &reqwest::Client| client.get(app.url("/healthz")).send();
    let (first, second) = (shopper_from([127, 0, 0, 2]), shopper_from([127, 0, 0, 3]));
    assert_eq!(healthz(&first).await.unwrap().status(), 200);
    assert_eq!(healthz(&first).await.unwrap().status(), 429);
    assert_eq!(
        healthz(&second).await.unwrap().status(),
        200,
        "another address is another client"
    );
}

/// Places an order under each of `keys` (each made), then one more under `over`: its answer.
async fn orders_then_one_over(app: &TestApp, keys: &[&str], over: &str) -> reqwest::Response {
    for key in keys {
        let response = post_order(&app.client, app, Some(key), MUG_ORDER).await;
        assert_eq!(response.status(), 201);
    }
    post_order(&app.client, app, Some(over), MUG_ORDER).await
}

#[tokio::test]
async fn a_session_with_as_many_unpaid_orders_as_it_may_is_refused_until_one_is_settled() {
    let app = spawn_app_with(|c| c.limits.pending_orders = 2).await;
    let refused = orders_then_one_over(&app, &["p-1", "p-2"], "p-3").await;
    assert_eq!(refused.headers()["retry-after"], "60");
    assert_problem(refused, 429, "pending-order-quota").await;
    assert_eq!(app.count("orders").await, 2);
    // The refusal is not stored with the key: once an order is settled, the same request
    // with the same key goes through.
    assert_ne!(app.key_state("p-3").await.as_deref(), Some("completed"));
    sqlx::query(
        "UPDATE orders SET status = 'cancelled' WHERE id = (SELECT id FROM orders LIMIT 1)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let retried = post_order(&app.client, &app, Some("p-3"), MUG_ORDER).await;
    assert_eq!(retried.status(), 201);
    assert_eq!(app.count("orders").await, 3);
}

#[tokio::test]
async fn a_session_claims_at_most_its_hourly_quota_of_new_keys_and_replays_the_rest() {
    let app = spawn_app_with(|c| c.limits.keys_per_hour = 2).await;
    let refused = orders_then_one_over(&app, &["k-1", "k-2"], "k-3").await;
    assert_eq!(refused.headers()["retry-after"], "300");
    assert_problem(refused, 429, "key-quota").await;
    assert_eq!(app.count("idempotency_keys").await, 2);
    assert_eq!(app.count("orders").await, 2);
    // A retry of a key claimed before is answered as always: the quota counts new keys.
    let replayed = post_order(&app.client, &app, Some("k-1"), MUG_ORDER).await;
    assert_eq!(replayed.status(), 201);
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn a_session_adds_to_its_cart_at_most_its_hourly_quota() {
    let app = spawn_app_with(|c| c.limits.cart_adds_per_hour = 2).await;
    app.add_to_cart_with_key(&app.client, "MUG-001", 1, "add-1")
        .await;
    app.add_to_cart_with_key(&app.client, "MUG-001", 1, "add-2")
        .await;
    let refused = app
        .post_fn(
            &app.client,
            "add_to_cart",
            &[("sku", "MUG-001"), ("quantity", "1"), ("add_key", "add-3")],
        )
        .await;
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.unwrap().contains("cart-add-quota"));
    assert_eq!(app.count("cart_adds").await, 2);
    // A repeat of an add that was counted is still answered with the cart.
    app.add_to_cart_with_key(&app.client, "MUG-001", 1, "add-1")
        .await;
    assert_eq!(app.cart(&app.client).await["lines"][0]["quantity"], 2);
}

/// Ten tabs of one session place orders at the same instant (a barrier) with a quota of
/// three: the database counts them one after another, so exactly three are made.
#[tokio::test]
async fn simultaneous_orders_of_one_session_cannot_pass_the_pending_quota() {
    let app = spawn_app_with(|c| {
        c.limits.pending_orders = 3;
        c.limits.writes_per_session = OFF;
    })
    .await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(10));
    let tabs: Vec<_> = (0..10)
        .map(|i| {
            let (client, url, barrier) =
                (app.client.clone(), app.url("/api/orders"), barrier.clone());
            tokio::spawn(async move {
                let request = client
                    .post(url)
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("tab-{i}"))
                    .body(MUG_ORDER);
                barrier.wait().await;
                request.send().await.unwrap().status().as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for tab in tabs {
        statuses.push(tab.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(app.count("orders").await, 3);
}

/// However the cookie header spells the session (a space before `=`, a decoy first), the
/// writes count against the session the shop reads from it.
#[tokio::test]
async fn no_spelling_of_the_cookie_escapes_the_session_write_rate() {
    let app = spawn_app_with(two_writes_at_once).await;
    let raw = reqwest::Client::new();
    let opened = raw.get(app.url("/api/session")).send().await.unwrap();
    let set = opened.headers()["set-cookie"].to_str().unwrap().to_owned();
    let id = set
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("once_session=")
        .to_owned();
    let spellings = [
        format!("once_session={id}"),
        format!("once_session ={id}"),
        format!("once_session=decoy{id}; once_session={id}"),
    ];
    let mut statuses = Vec::new();
    for (i, cookie) in spellings.iter().cycle().take(6).enumerate() {
        let response = raw
            .post(app.url("/api/orders"))
            .header("cookie", cookie)
            .header("content-type", "application/json")
            .header("idempotency-key", format!("spelled-{i}"))
            .body(MUG_ORDER)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    let created = statuses.iter().filter(|s| **s == 201).count();
    assert!(
        created <= 3,
        "a burst of two (and one more second at most): {statuses:?}"
    );
    assert!(statuses.contains(&429), "{statuses:?}");
}
