//! Repeats of completed keys answered from memory (docs/protocol.md, "Repeats from memory"):
//! with the database gone, a replay and a 422 are still answered, and nothing else is; an
//! answer is never given past its session's expiry; several instances with caches on one
//! database answer a story of requests exactly as one instance without.

use std::{collections::HashMap, sync::Arc, time::Duration};

use reqwest::Client;
use tokio::sync::Barrier;

use crate::helpers::*;

const OTHER_ORDER: &str = r#"{"items":[{"sku":"MUG-001","quantity":3}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;

async fn replayed(response: reqwest::Response) -> (u16, String) {
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_completed_key_is_answered_with_the_database_down() {
    let app = spawn_app().await;
    let first = post_order(&app.client, &app, Some("memory-1"), MUG_ORDER).await;
    assert_eq!(first.status(), 201);
    let first_body = first.text().await.unwrap();
    app.take_database_down().await;

    let again = post_order(&app.client, &app, Some("memory-1"), MUG_ORDER).await;
    assert_eq!(replayed(again).await, (201, first_body));
    let reused = post_order(&app.client, &app, Some("memory-1"), OTHER_ORDER).await;
    assert_problem(reused, 422, "idempotency-key-reused").await;
    // The control: anything else needs the database, which is gone.
    let new = post_order(&app.client, &app, Some("memory-2"), MUG_ORDER).await;
    assert_eq!(new.status(), 503);

    app.bring_database_up().await;
    assert_eq!(app.metric("once_idempotency_remembered_total").await, 2);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn without_a_cache_every_repeat_needs_the_database() {
    let app = spawn_app_with(|c| c.answer_cache.max_bytes = 0).await;
    let first = post_order(&app.client, &app, Some("no-memory"), MUG_ORDER).await;
    assert_eq!(first.status(), 201);
    app.take_database_down().await;
    let again = post_order(&app.client, &app, Some("no-memory"), MUG_ORDER).await;
    assert_eq!(again.status(), 503);
    app.bring_database_up().await;
}

#[tokio::test]
async fn an_answer_another_instance_completed_is_kept_once_read() {
    let app = spawn_app().await;
    let other = start(app.config.clone(), app.db_name.clone()).await;
    let first = post_order(&app.client, &app, Some("read-then-kept"), MUG_ORDER).await;
    assert_eq!(first.status(), 201);
    let first_body = first.text().await.unwrap();
    // The other instance reads the table once, and keeps what it read.
    let read = post_order(&app.client, &other, Some("read-then-kept"), MUG_ORDER).await;
    assert_eq!(replayed(read).await, (201, first_body.clone()));
    app.take_database_down().await;
    let kept = post_order(&app.client, &other, Some("read-then-kept"), MUG_ORDER).await;
    assert_eq!(replayed(kept).await, (201, first_body));
    app.bring_database_up().await;
}

#[tokio::test]
async fn an_answer_is_not_given_past_its_session_s_expiry() {
    let app = spawn_app().await;
    // A session that holds an order is never forgotten as unused (`session::forget_unused`):
    // only its expiry ends it.
    place_order(&app).await;
    // The session ends soon (as an idle one does at the end of its 30 days): a few seconds,
    // or longer when the machine is too busy to send two requests in that time, so that the
    // cache has learnt the session's end from a read before it comes.
    let key = remembered_until_the_session_ends(&app).await;
    while !still_ended(&app).await {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    assert_problem(after, 400, "session-required").await;
}

/// Ends the session in a few seconds, then sends a new key and its repeat, which the cache
/// answers; returns the key. A window too short for the machine is tried again, longer, with
/// another key: a request that arrived after the session ended (refused, rightly), or a
/// repeat that came after the entry's life (kept a second short of the session's) and was
/// answered by the database.
async fn remembered_until_the_session_ends(app: &TestApp) -> String {
    for seconds in [4, 15, 60] {
        sqlx::query(
            "UPDATE tower_sessions.session SET expiry_date = now() + $1 * interval '1 second'",
        )
        .bind(f64::from(seconds))
        .execute(&app.db)
        .await
        .unwrap();
        let key = format!("session-ends-{seconds}");
        let first = post_order(&app.client, app, Some(&key), MUG_ORDER).await;
        if first.status() == 400 && still_ended(app).await {
            continue;
        }
        assert_eq!(first.status(), 201, "{}", first.text().await.unwrap());
        let remembered = app.metric("once_idempotency_remembered_total").await;
        let again = post_order(&app.client, app, Some(&key), MUG_ORDER).await;
        if again.status() == 400 && still_ended(app).await {
            continue;
        }
        assert_eq!(again.status(), 201, "{}", again.text().await.unwrap());
        if app.metric("once_idempotency_remembered_total").await == remembered + 1 {
            return key;
        }
    }
    panic!("in no window of up to a minute was a repeat answered from memory");
}

/// Whether the session has ended (a refusal for want of a session is then the right answer).
async fn still_ended(app: &TestApp) -> bool {
    sqlx::query_scalar("SELECT bool_and(expiry_date < now()) FROM tower_sessions.session")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// One step of the story: which shopper sends which key with which body to which instance.
#[derive(Clone, Copy)]
struct Step {
    shopper: usize,
    key: usize,
    quantity: u32,
    instance: usize,
}

/// A story with every kind of repeat, spread over `instances`: new keys, repeats on every
/// instance, a key reused with another body, and five tabs sending one new key at once.
fn story(instances: usize) -> Vec<Vec<Step>> {
    let mut rounds = Vec::new();
    for key in 0..6 {
        for shopper in 0..3 {
            let at = |n: usize| (shopper + key + n) % instances;
            let step = |quantity, n| Step {
                shopper,
                key,
                quantity,
                instance: at(n),
            };
            // Five at once (a round), then repeats one by one, one with another body.
            rounds.push((0..5).map(|n| step(1, n)).collect());
            for (quantity, n) in [(1, 1), (1, 2), (2, 0), (1, 0), (1, 2)] {
                rounds.push(vec![step(quantity, n)]);
            }
        }
    }
    rounds
}

/// What a client can tell of an answer, with the order's id replaced by the first answer's
/// index for that key (ids differ between runs; which request got which answer must not).
type Seen = (u16, bool, String);

async fn run_story(instances: &[TestApp]) -> Vec<Vec<Seen>> {
    let shoppers: Vec<Client> = (0..3).map(|_| shopper()).collect();
    for client in &shoppers {
        instances[0].open_session(client).await;
    }
    let mut firsts: HashMap<(usize, usize), String> = HashMap::new();
    let mut seen = Vec::new();
    for round in story(instances.len()) {
        let barrier = Arc::new(Barrier::new(round.len()));
        let sends = round.iter().map(|step| {
            let (client, app, barrier) = (
                &shoppers[step.shopper],
                &instances[step.instance],
                barrier.clone(),
            );
            let key = format!("story-{}", step.key);
            let body =
                order_with(serde_json::json!([{"sku": "MUG-001", "quantity": step.quantity}]))
                    .to_string();
            async move {
                barrier.wait().await;
                let prefer = [("prefer", "wait=10")];
                let r = post_order_with(client, app, Some(&key), &body, &prefer).await;
                let replay = r.headers().get("idempotent-replayed").is_some();
                (r.status().as_u16(), replay, r.text().await.unwrap())
            }
        });
        let answers = futures::future::join_all(sends).await;
        let mut round_seen = Vec::new();
        for (step, (status, replay, body)) in round.iter().zip(answers) {
            let first = firsts
                .entry((step.shopper, step.key))
                .or_insert_with(|| body.clone());
            let same = if status == 201 {
                (&body == first).to_string()
            } else {
                String::new()
            };
            round_seen.push((status, replay, same));
        }
        seen.push(round_seen);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_with_caches_answer_as_one_without() {
    let cached = spawn_app().await;
    let mut instances = vec![];
    for _ in 0..2 {
        instances.push(start(cached.config.clone(), cached.db_name.clone()).await);
    }
    instances.insert(0, cached);
    let with_caches = run_story(&instances).await;

    let plain = spawn_app_with(|c| c.answer_cache.max_bytes = 0).await;
    let without = run_story(std::slice::from_ref(&plain)).await;

    for (n, (a, b)) in with_caches.iter().zip(&without).enumerate() {
        let (mut a, mut b) = (a.clone(), b.clone());
        // Which of five racers ran the request is the database's choice: compare as sets.
        a.sort();
        b.sort();
        assert_eq!(
            a, b,
            "round {n}: three cached instances answered otherwise than one without"
        );
    }
    // 18 keys, each one order, whichever instance answered.
    assert_eq!(instances[0].count("orders").await, 18);
    assert_eq!(plain.count("orders").await, 18);
    let remembered: u64 = futures::future::join_all(
        instances
            .iter()
            .map(|i| i.metric("once_idempotency_remembered_total")),
    )
    .await
    .into_iter()
    .sum();
    assert!(
        remembered > 0,
        "no repeat was answered from memory: the story tested nothing"
    );
}

/// An instance that reads a key another finished a while ago keeps it only for the
/// retention left: past it and the purge, its repeat is a new request there too.
#[tokio::test]
async fn a_read_answer_is_kept_only_for_the_retention_left() {
    let app = spawn_app_with(|c| {
        c.idempotency_lease = Duration::from_secs(1);
        c.idempotency_retention = Duration::from_secs(6);
    })
    .await;
    let other = start(app.config.clone(), app.db_name.clone()).await;
    let first = post_order(&app.client, &app, Some("late-reader"), MUG_ORDER).await;
    assert_eq!(first.status(), 201);
    // Read halfway through the retention (three seconds to spare for a busy machine)...
    tokio::time::sleep(Duration::from_secs(3)).await;
    let read = post_order(&app.client, &other, Some("late-reader"), MUG_ORDER).await;
    assert_eq!(read.headers()["idempotent-replayed"], "true");
    // ...and asked again once the retention has passed, by the database's clock, and the
    // purge has run: well within the hour an entry may otherwise live.
    let passed = "SELECT coalesce(bool_and(finished_at + interval '6 seconds' < now()), true)
                    FROM idempotency_keys";
    eventually("the key's retention has passed", || async {
        sqlx::query_scalar(passed).fetch_one(&app.db).await.unwrap()
    })
    .await;
    once_pg::purge(&app.db, app.config.idempotency_retention)
        .await
        .unwrap();
    let after = post_order(&app.client, &other, Some("late-reader"), MUG_ORDER).await;
    assert_eq!(after.status(), 201);
    assert!(
        after.headers().get("idempotent-replayed").is_none(),
        "the other instance answered a purged key from memory"
    );
    assert_eq!(app.count("orders").await, 2);
}
