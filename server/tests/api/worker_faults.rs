//! The chain under faults: consumer processes killed between their side effects and their
//! ack, NATS unreachable mid-run, the database gone for a while. After each, every paid
//! order has shipped exactly once: lost, duplicated and unexpected are all zero.

use std::{process::Stdio, time::Duration};

use rand::Rng;
use tokio::process::{Child, Command};

use crate::helpers::{proxy::Proxy, *};

const N: usize = 10;
const MUGS: i64 = 120;
/// Deliveries a consumer process applies at once: fewer than the orders, so that kills land
/// on several batches.
const BATCH: i64 = 3;

/// `server worker fulfillment` as its own process, on the test app's database and bus.
fn consumer_process(app: &TestApp, pause_before_ack_ms: u64) -> Child {
    let events = &app.config.events;
    let mut command = Command::new(env!("CARGO_BIN_EXE_server"));
    command
        .args(["worker", "fulfillment"])
        .env("DATABASE_URL", &app.config.database_url)
        .env("PROVIDER_WEBHOOK_SECRETS", TEST_WEBHOOK_SECRET)
        .env("PROVIDER_API_KEY", TEST_PROVIDER_API_KEY)
        .env("IDEMPOTENCY_FINGERPRINT_SECRETS", TEST_FINGERPRINT_SECRET)
        .env("ONCE_FAULT_INJECTION", "on")
        .env(
            "ONCE_FAULT_PAUSE_BEFORE_ACK_MS",
            pause_before_ack_ms.to_string(),
        )
        .env("BUS_ACK_WAIT_MS", "1500")
        .env("EVENTS_POLL_MS", "100")
        .env("CONSUMER_MAX_ATTEMPTS", "30")
        .env("CONSUMER_BATCH", BATCH.to_string())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .kill_on_drop(true);
    match &events.nats_url {
        Some(url) => command
            .env("NATS_URL", url)
            .env("NATS_STREAM", &events.nats_stream)
            .env("NATS_SUBJECT_PREFIX", &events.nats_subject_prefix),
        None => command.env_remove("NATS_URL"),
    };
    command.spawn().expect("the server binary starts")
}

async fn consumers_killed_mid_message_lose_and_repeat_nothing(on: OnBus) {
    let app = spawn_chain(on, |_| {}).await;
    let orders = app.paid_orders(N).await;
    let context = app.workers().await;
    context.relay().try_execute_task().await.unwrap();

    // Each process commits a batch of fulfillments, then pauses 1.2 s before its ack:
    // SIGKILL lands there (or anywhere before) at a random moment, eight times over (more,
    // on a machine so loaded that no process got as far as a commit). A process lives under
    // 0.9 s, so it commits at most one batch and never acks it.
    let mut kills = 0;
    while kills < 8 || (kills < 24 && app.scalar("SELECT count(*) FROM fulfillments").await == 0) {
        let mut child = consumer_process(&app, 1200);
        let wait = rand::rng().random_range(200..900);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        child.kill().await.expect("SIGKILL");
        kills += 1;
    }
    let fulfilled_under_kills = app.scalar("SELECT count(*) FROM fulfillments").await;
    assert!(
        fulfilled_under_kills > 0,
        "the killed consumers did commit work"
    );
    assert!(
        fulfilled_under_kills <= kills * BATCH,
        "a process never got past one batch without its ack"
    );
    if let OnBus::Postgres = on {
        let settled = "SELECT count(*) FROM bus_deliveries WHERE settled_at IS NOT NULL";
        assert_eq!(
            app.scalar(settled).await,
            0,
            "no killed process acked what it committed"
        );
    }

    let mut survivor = consumer_process(&app, 0);
    app.wait_for_count(
        "SELECT count(*) FROM orders WHERE status = 'fulfilled'",
        N as i64,
        Duration::from_secs(60),
    )
    .await;
    if let OnBus::Postgres = on {
        // Every message answered at last, the ones left in killed hands included (they
        // come back after the ack wait, and are acked as duplicates).
        app.wait_for_count(
            "SELECT count(*) FROM bus_deliveries WHERE consumer = 'fulfillment' AND settled_at IS NULL",
            0,
            Duration::from_secs(60),
        )
        .await;
    }
    survivor.kill().await.unwrap();
    context.relay().try_execute_task().await.unwrap();
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    if let OnBus::Postgres = on {
        let redelivered = app
            .scalar("SELECT count(*) FROM bus_deliveries WHERE deliveries > 1")
            .await;
        assert!(
            redelivered > 0,
            "messages in the hands of killed consumers came back"
        );
    }
    app.drop_stream().await;
}

#[tokio::test]
async fn consumers_killed_mid_message_lose_and_repeat_nothing_on_postgres() {
    consumers_killed_mid_message_lose_and_repeat_nothing(OnBus::Postgres).await;
}

#[tokio::test]
async fn consumers_killed_mid_message_lose_and_repeat_nothing_on_nats() {
    consumers_killed_mid_message_lose_and_repeat_nothing(OnBus::Nats).await;
}

/// Relay and consumer running as the server runs them, until `stop`.
async fn run_chain(context: &server::workers::Context, stop: &tokio_util::sync::CancellationToken) {
    use server::workers::{spawn, Worker};
    spawn(context, &[Worker::Relay, Worker::Fulfillment], stop)
        .await
        .unwrap();
}

#[tokio::test]
async fn nats_unreachable_mid_run_stalls_delivery_and_it_resumes_with_nothing_lost() {
    let target = nats_url().trim_start_matches("nats://").parse().unwrap();
    let proxy = Proxy::start(target).await;
    let app = spawn_chain(OnBus::Nats, |config| {
        config.events.nats_url = Some(format!("nats://127.0.0.1:{}", proxy.port));
    })
    .await;
    let context = app.workers().await;
    let stop = tokio_util::sync::CancellationToken::new();
    run_chain(&context, &stop).await;
    let mut orders = app.paid_orders(N / 2).await;
    app.wait_for_count(
        "SELECT count(*) FROM orders WHERE status = 'fulfilled'",
        (N / 2) as i64,
        Duration::from_secs(30),
    )
    .await;

    proxy.sever();
    orders.extend(app.paid_orders(N / 2).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = app.scalar("SELECT count(*) FROM outbox_events WHERE published_at IS NULL AND event_type = 'order.paid'").await;
    assert_eq!(
        waiting,
        (N / 2) as i64,
        "nothing is published while NATS is away"
    );
    assert_eq!(
        app.scalar("SELECT count(*) FROM orders WHERE status = 'fulfilled'")
            .await,
        (N / 2) as i64
    );

    proxy.restore().await;
    app.wait_for_count(
        "SELECT count(*) FROM orders WHERE status = 'fulfilled'",
        N as i64,
        Duration::from_secs(60),
    )
    .await;
    app.wait_for_count(
        "SELECT count(*) FROM outbox_events WHERE published_at IS NULL",
        0,
        Duration::from_secs(30),
    )
    .await;
    stop.cancel();
    app.assert_each_order_shipped_once(&orders, MUGS).await;
    app.drop_stream().await;
}

#[tokio::test]
async fn the_database_gone_for_a_while_stalls_delivery_and_it_resumes_with_nothing_lost() {
    let app = spawn_chain(OnBus::Postgres, |_| {}).await;
    let orders = app.paid_orders(N).await;
    app.take_database_down().await;
    let context = app.workers().await;
    let stop = tokio_util::sync::CancellationToken::new();
    run_chain(&context, &stop).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    app.bring_database_up().await;

    app.wait_for_count(
        "SELECT count(*) FROM orders WHERE status = 'fulfilled'",
        N as i64,
        Duration::from_secs(60),
    )
    .await;
    stop.cancel();
    app.assert_each_order_shipped_once(&orders, MUGS).await;
}
