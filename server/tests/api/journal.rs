//! The order journal (docs/design.md, "The order journal"): every kind of entry written once,
//! in the transaction of what it records, so nothing rolled back leaves one; an order's story
//! read in order, with the requests that carried its key before it existed; the search.

use std::time::Duration;

use reqwest::StatusCode;
use uuid::Uuid;

use crate::{helpers::*, operator::operator};

#[tokio::test]
async fn a_paid_orders_story_has_each_entry_once_and_in_order() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_key = Uuid::new_v4().to_string();
    let placed = post_order(&app.client, &app, Some(&order_key), MUG_ORDER).await;
    assert_eq!(placed.status(), 201);
    let order: serde_json::Value = placed.json().await.unwrap();
    let order_id = order["id"].as_str().unwrap().to_owned();
    let again = post_order(&app.client, &app, Some(&order_key), MUG_ORDER).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let paid = pay(&app, &order_id, "pay-key", CARD_OK, &[]).await;
    assert_eq!(paid.status(), 201);
    let repaid = pay(&app, &order_id, "pay-key", CARD_OK, &[]).await;
    assert_eq!(repaid.headers()["idempotent-replayed"], "true");
    repeats_written(&app, "replay", 2).await;
    // The provider's webhook arrives after the charge's answer applied it; then once more.
    eventually("the provider's callback is applied", || async {
        app.count_where("payment_callbacks", "outcome <> 'received'")
            .await
            == 1
    })
    .await;
    let payload: serde_json::Value = sqlx::query_scalar("SELECT payload FROM payment_callbacks")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(app.callback_outcome(&payload).await, "duplicate");
    // The bus delivers order.paid two or three times; the consumer applies it once.
    let workers = app.workers().await;
    let mut consumer = redelivering_fulfillment(&workers).await;
    drain(&workers, &mut consumer).await;
    let event_id: Uuid = sqlx::query_scalar(
        "SELECT id FROM outbox_events WHERE event_type = 'order.paid' AND aggregate_id = $1::uuid",
    )
    .bind(&order_id)
    .fetch_one(&app.db)
    .await
    .unwrap();

    let story = story(&app, &order_id).await;
    assert_in_order(
        &story,
        &[
            ("status", "placed: pending_payment"),
            ("event", "order.created recorded in the outbox"),
            ("request", "POST /api/orders answered 201: executed"),
            ("replay", "POST /api/orders answered 201, replayed"),
            ("payment", "payment attempt recorded"),
            ("provider_call", "charge call to the provider started"),
            ("payment", "payment pending → succeeded"),
            ("status", "pending_payment → paid"),
            ("event", "order.paid recorded in the outbox"),
            (
                "request",
                "POST /api/orders/{id}/payments answered 201: executed",
            ),
            ("callback", ": duplicate, nothing changed"),
            ("published", "order.paid published"),
            ("delivery", "order.paid delivered to fulfillment: shipped"),
            ("dedup", "consumed before, skipped"),
        ],
    );
    // The consumer's transaction: its writes, then what is written at its commit (the
    // delivery and the fulfillment, each with the state it ended in).
    assert_in_order(
        &story,
        &[
            ("status", "paid → fulfilled"),
            ("event", "order.fulfilled recorded"),
            ("email", "email to the shopper: queued"),
            ("delivery", "order.paid delivered to fulfillment: shipped"),
            ("fulfillment", "fulfillment shipped, shipment"),
        ],
    );
    assert_in_order(
        &story,
        &[
            ("request", "payments answered 201: executed"),
            ("replay", "payments answered 201, replayed"),
        ],
    );
    assert_in_order(
        &story,
        &[("callback", "charge.succeeded"), ("callback", "duplicate")],
    );
    // Once each: nothing recorded twice, however often it was repeated.
    for (kind, times) in [
        ("request", 2),
        ("replay", 2),
        ("status", 3),
        ("payment", 2),
        ("provider_call", 1),
        ("callback", 2),
        ("event", 3),
        ("delivery", 1),
        ("fulfillment", 1),
        ("email", 1),
    ] {
        assert_eq!(count(&story, kind), times, "{kind} in {story:#?}");
    }
    assert_eq!(
        count(&story, "dedup") as u32,
        copies(&event_id.to_string()) - 1,
        "one entry per redelivery skipped: {story:#?}"
    );
    let _ = provider;
}

#[tokio::test]
async fn a_rolled_back_request_leaves_no_entry_and_its_retry_leaves_one() {
    let app = spawn_app_with_faults(|_| {}).await;
    let key = Uuid::new_v4().to_string();
    let failed = post_order_with(
        &app.client,
        &app,
        Some(&key),
        MUG_ORDER,
        &[("once-test-fail", "transient")],
    )
    .await;
    assert_eq!(failed.status(), 503);
    assert_eq!(app.count("order_journal").await, 0, "the rollback took all");
    let placed = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_eq!(placed.status(), 201);
    assert_eq!(
        app.count_where("order_journal", "kind = 'request'").await,
        1
    );
    assert_eq!(app.count_where("order_journal", "kind = 'status'").await, 1);
}

#[tokio::test]
async fn a_409_before_the_order_existed_is_in_its_story_through_its_key() {
    let app = spawn_app_with_faults(|_| {}).await;
    let key = Uuid::new_v4().to_string();
    let first = app.spawn_held_order(&key, "journal");
    app.wait_until_held("journal", 1).await;
    let meanwhile = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_eq!(meanwhile.status(), 409);
    repeats_written(&app, "in_progress", 1).await;
    app.open_gate("journal").await;
    let placed = first.await.unwrap();
    assert_eq!(placed.status(), 201);
    let order: serde_json::Value = placed.json().await.unwrap();
    let order_no = order["order_no"].as_str().unwrap();
    let journal = server::journal::for_order(
        &app.db,
        order_no,
        server::journal::View::All,
        server::journal::Window::First,
    )
    .await
    .unwrap()
    .expect("the order");
    let kinds: Vec<&str> = journal.entries.iter().map(|e| e.kind.as_str()).collect();
    // The order's row was written before the hold; the 409 came while it was held.
    assert_eq!(
        kinds,
        ["status", "event", "in_progress", "request"],
        "{kinds:?}"
    );
    // Another session's 409 under the same key text is not linked into this story: keys
    // are per session, and the link is by key and session.
    let stranger = shopper();
    app.open_session(&stranger).await;
    let send = |gate: Option<&str>| {
        let mut request = stranger
            .post(app.url("/api/orders"))
            .header("content-type", "application/json")
            .header("idempotency-key", &key)
            .body(MUG_ORDER);
        if let Some(gate) = gate {
            request = request.header("once-test-hold", gate);
        }
        request.send()
    };
    let theirs = tokio::spawn(send(Some("stranger")));
    app.wait_until_held("stranger", 1).await;
    assert_eq!(send(None).await.unwrap().status(), 409);
    app.open_gate("stranger").await;
    assert_eq!(theirs.await.unwrap().unwrap().status(), 201);
    // The stranger's 409 is written, in their story.
    repeats_written(&app, "in_progress", 2).await;
    let journal = server::journal::for_order(
        &app.db,
        order_no,
        server::journal::View::All,
        server::journal::Window::First,
    )
    .await
    .unwrap()
    .unwrap();
    let kinds: Vec<&str> = journal.entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["status", "event", "in_progress", "request"],
        "nothing of the stranger's"
    );
}

#[tokio::test]
async fn a_request_fenced_out_after_its_entry_was_written_leaves_none() {
    let app = spawn_app_with_faults(|c| c.idempotency_lease = Duration::from_millis(500)).await;
    let stale = app.spawn_held_order("fenced", "paused");
    app.wait_until_held("paused", 1).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let takeover = app.spawn_held_order("fenced", "second");
    app.wait_until_held("second", 1).await;
    // The stale holder writes its entry in its transaction, then loses the fence on the
    // lease and rolls back: the entry goes with its order.
    app.open_gate("paused").await;
    assert_eq!(stale.await.unwrap().status(), 409);
    assert_eq!(app.metric("once_idempotency_fenced_total").await, 1);
    app.open_gate("second").await;
    assert_eq!(takeover.await.unwrap().status(), 201);
    assert_eq!(
        app.count_where("order_journal", "kind = 'request'").await,
        1,
        "the takeover's entry only"
    );
    assert_eq!(app.count_where("order_journal", "kind = 'status'").await, 1);
}

#[tokio::test]
async fn a_request_naming_someone_elses_order_is_not_written_into_its_story() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    let before = story(&app, &order_id).await;
    let stranger = shopper();
    app.open_session(&stranger).await;
    // Their own key, reused on our order's payment (422), and a fresh one (404).
    let theirs = post_order(&stranger, &app, Some("their-key"), MUG_ORDER).await;
    assert_eq!(theirs.status(), 201);
    for key in ["their-key", "another-key"] {
        let paying = stranger
            .post(app.url(&format!("/api/orders/{order_id}/payments")))
            .header("idempotency-key", key)
            .json(&serde_json::json!({ "card_number": CARD_OK }))
            .send()
            .await
            .unwrap();
        assert!([404, 422].contains(&paying.status().as_u16()), "{key}");
    }
    // Our own replay, written after theirs would have been (one writer, in order).
    let key: String = sqlx::query_scalar(
        "SELECT idempotency_key FROM order_journal WHERE kind = 'request' AND order_id = $1::uuid",
    )
    .bind(&order_id)
    .fetch_one(&app.db)
    .await
    .unwrap();
    let replay = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    repeats_written(&app, "replay", 1).await;
    assert_eq!(
        story(&app, &order_id).await[..before.len()],
        before[..],
        "nothing of the stranger's"
    );
    assert_eq!(
        app.count_where("order_journal", "order_id IS NULL").await,
        0,
        "nor anywhere else: a request about no order of its own is no story's"
    );
}

#[tokio::test]
async fn search_finds_the_order_by_each_of_its_identifiers_and_opens_its_journal() {
    let (app, _provider) = spawn_shop_and_provider_with(|c| {
        c.operator_password = Some(crate::operator::PASSWORD.into());
    })
    .await;
    let key = Uuid::new_v4().to_string();
    let placed = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    let order: serde_json::Value = placed.json().await.unwrap();
    let (order_id, order_no) = (
        order["id"].as_str().unwrap().to_owned(),
        order["order_no"].as_str().unwrap().to_owned(),
    );
    let payment: serde_json::Value = pay(&app, &order_id, "search-pay", CARD_OK, &[])
        .await
        .json()
        .await
        .unwrap();
    let event_id: String =
        sqlx::query_scalar("SELECT id::text FROM outbox_events WHERE aggregate_id = $1::uuid")
            .bind(&order_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    let (client, _) = operator(&app).await;
    let by_each = [
        order_no.to_lowercase(),
        order_id.clone(),
        key,
        payment["id"].as_str().unwrap().to_owned(),
        payment["provider_charge_id"].as_str().unwrap().to_owned(),
        event_id,
    ];
    for q in &by_each {
        let response = client
            .get(app.url("/operator/search"))
            .query(&[("q", q)])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{q}");
        let journal = format!("/operator/orders/{order_no}");
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        // An identifier an entry carries opens the story at that entry, marked.
        let (path, anchor) = location.split_once('#').unwrap_or((&location, ""));
        if q == &order_no.to_lowercase() || q == &order_id {
            assert_eq!(location, journal, "{q}");
        } else {
            let entry = anchor.strip_prefix('e').expect("an entry's anchor");
            assert_eq!(path, format!("{journal}?from={entry}"), "{q}");
            let html = app.get_text(&client, path).await;
            let matched = format!("<tr id=\"e{entry}\" data-kind=");
            assert!(html.contains(&matched), "{q}: {html}");
            assert!(html.contains("data-testid=\"matched\""), "{q}");
            assert!(html.contains(q.as_str()), "{q}: the matched entry names it");
        }
        let html = app.get_text(&client, &journal).await;
        assert!(html.contains("data-testid=\"journal\""), "{q}");
        assert!(html.contains("charge call to the provider started"), "{q}");
    }
    let nothing = client
        .get(app.url("/operator/search"))
        .query(&[("q", "ch_nobody")])
        .send()
        .await
        .unwrap();
    assert_eq!(nothing.status(), StatusCode::NOT_FOUND);
    let html = nothing.text().await.unwrap();
    assert!(html.contains("No order matches that search."));
    assert!(
        !html.contains("ch_nobody"),
        "what was searched is not shown back"
    );
}

#[tokio::test]
async fn retention_forgets_a_storys_changes_together_and_requests_with_their_keys() {
    let app = spawn_app().await;
    let (ended, ongoing) = (place_order(&app).await, place_order(&app).await);
    // Each had a 409 before its order existed (found through its key).
    sqlx::query(
        "INSERT INTO order_journal (kind, summary, scope_tag, idempotency_key, fold_minute)
         SELECT 'in_progress', '409', scope_tag, idempotency_key, date_trunc('minute', at)
           FROM order_journal WHERE kind = 'request'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    // Both stories began two days ago. The ongoing one changed just now; the ended one only
    // had a request just now, which changes nothing and keeps nothing alive. Written in one
    // transaction: the server's own retention round, which may run at any moment, sees the
    // stories before or after, never the ongoing one backdated without its late change.
    let mut tx = app.db.begin().await.unwrap();
    sqlx::query("UPDATE order_journal SET at = at - interval '2 days'")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO order_journal (order_id, kind, summary) VALUES ($1::uuid, 'email', 'late')",
    )
    .bind(&ongoing)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key)
         VALUES ($1::uuid, 'request', 'new', 'tag', 'new-key')",
    )
    .bind(&ended)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let changes = |story: Vec<(String, String)>| {
        story
            .into_iter()
            .filter(|(kind, _)| kind != "request")
            .collect::<Vec<_>>()
    };
    let ongoing_changes = changes(story(&app, &ongoing).await);

    server::journal::forget_old(&app.db, Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(
        story(&app, &ended).await,
        [("request".to_owned(), "new".to_owned())],
        "the ended story's changes are gone; the new request stays as long as its key"
    );
    assert_eq!(
        story(&app, &ongoing).await,
        ongoing_changes,
        "the ongoing story keeps every change, old ones too, and forgets its old request"
    );
    assert!(ongoing_changes.len() > 2, "{ongoing_changes:?}");
    assert_eq!(
        app.count_where("order_journal", "order_id IS NULL").await,
        0,
        "the 409s from before the orders, as old as their keys, are gone"
    );
}

/// A signed callback whose reference is one order's attempt and whose charge is another
/// order's is about the attempt it names (the one it is applied to, or refused for): it is
/// written into that story once, and nowhere else; its duplicate too.
#[tokio::test]
async fn a_callback_naming_one_attempt_and_anothers_charge_is_in_the_attempts_story() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let (paid_order_id, _, paid_charge) = paid_order(&app).await;
    let other_order = place_order(&app).await;
    let attempt = pending_attempt(&app, &other_order).await;
    let crossed = callback(
        "charge.succeeded",
        "txn_crossed",
        &paid_charge,
        3600,
        &attempt,
    );
    app.callback_outcome(&crossed).await;
    app.send_callback(&crossed, now()).await;
    let callbacks = |order: String| {
        let app = &app;
        async move {
            story(app, &order)
                .await
                .into_iter()
                .filter(|(kind, summary)| kind == "callback" && summary.contains("txn_crossed"))
                .count()
        }
    };
    assert_eq!(
        callbacks(other_order.clone()).await,
        2,
        "the callback and its duplicate"
    );
    assert_eq!(
        callbacks(paid_order_id.clone()).await,
        0,
        "not the charge's order"
    );
}
