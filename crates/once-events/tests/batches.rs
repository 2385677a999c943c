//! The chain in batches, on both buses: a bad event in a batch harms only itself, a relay
//! killed between publishing a batch and marking it costs a republish and nothing more, and
//! two relays on one backlog publish each event once.

mod common;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use once_events::{
    bus::{postgres::PgBus, Bus, ConsumerSpec, Message, Published, Subscription},
    BusConfig, Counter,
};
use sqlx::PgPool;
use tokio::sync::{Barrier, Notify};

use common::{
    consumer, fresh_db, message, nats_bus, nats_config, record_events, relay, scalar, Counted,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum On {
    Postgres,
    Nats,
}

/// The bus a test runs on: on NATS, a stream of its own, deleted by [`TestBus::done`].
struct TestBus {
    db: PgPool,
    nats: Option<BusConfig>,
}

impl TestBus {
    /// On NATS, the stream drops repeats for `window`.
    fn new(on: On, db: &PgPool, window: Duration) -> Self {
        let nats = (on == On::Nats).then(|| nats_config(window));
        Self {
            db: db.clone(),
            nats,
        }
    }

    /// A connection to the bus (each call is another process's).
    async fn connect(&self) -> Arc<dyn Bus> {
        match &self.nats {
            None => Arc::new(PgBus::new(self.db.clone(), Duration::from_millis(100))),
            Some(config) => Arc::new(nats_bus(config).await),
        }
    }

    async fn done(self) {
        if let Some(config) = &self.nats {
            nats_bus(config).await.delete_stream().await.unwrap();
        }
    }
}

const WINDOW: Duration = Duration::from_secs(120);

/// Three good events, one whose handler refuses it and one message that is no event, fetched
/// as one batch: the three are applied, the two bad ones dead-lettered, and nothing else.
async fn a_bad_event_in_a_batch_dead_letters_only_itself(on: On) {
    let (db, _database) = fresh_db().await;
    let test_bus = TestBus::new(on, &db, WINDOW);
    let bus = test_bus.connect().await;
    let counted = Arc::new(Counted::default());
    let mut consumer = consumer(&db, bus.as_ref(), &counted).await;
    let junk = Message {
        body: b"{ not an event".to_vec(),
        ..message(serde_json::json!({}))
    };
    let poison = message(serde_json::json!({ "poison": true }));
    let good = || message(serde_json::json!({}));
    let batch = [good(), poison.clone(), good(), junk.clone(), good()];
    bus.publish_all(&batch).await.unwrap();

    let wait = Duration::from_secs(2);
    assert_eq!(
        consumer.try_execute_task(wait).await.unwrap(),
        5,
        "one batch"
    );
    assert_eq!(counted.of(Counter::BatchSplit), 1, "the batch failed whole");
    assert_eq!(scalar(&db, "SELECT count(*) FROM effects").await, 3);
    let dead: Vec<String> =
        sqlx::query_scalar("SELECT message_id FROM dead_letters ORDER BY message_id")
            .fetch_all(&db)
            .await
            .unwrap();
    let mut expected = vec![poison.id, junk.id];
    expected.sort();
    assert_eq!(dead, expected, "only the bad two are dead letters");
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM consumed_events").await,
        3,
        "the poison's dedup record went with its rolled-back effect"
    );
    let again = consumer.try_execute_task(Duration::from_millis(500)).await;
    assert_eq!(again.unwrap(), 0, "every delivery was answered");
    test_bus.done().await;
}

#[tokio::test]
async fn a_bad_event_in_a_batch_dead_letters_only_itself_on_postgres() {
    a_bad_event_in_a_batch_dead_letters_only_itself(On::Postgres).await;
}

#[tokio::test]
async fn a_bad_event_in_a_batch_dead_letters_only_itself_on_jetstream() {
    a_bad_event_in_a_batch_dead_letters_only_itself(On::Nats).await;
}

/// A bus that publishes, then never answers: a relay using it is stuck between publishing
/// its batch and marking it, where the test kills it.
struct StuckAfterPublish {
    inner: Arc<dyn Bus>,
    published: Arc<Notify>,
}

#[async_trait]
impl Bus for StuckAfterPublish {
    async fn publish_all(&self, messages: &[Message]) -> anyhow::Result<Vec<Published>> {
        self.inner.publish_all(messages).await?;
        self.published.notify_one();
        std::future::pending().await
    }

    async fn subscribe(&self, spec: &ConsumerSpec) -> anyhow::Result<Box<dyn Subscription>> {
        self.inner.subscribe(spec).await
    }
}

/// Kills a relay after it published the whole backlog and before it marked any of it.
async fn kill_a_relay_after_publishing(db: &PgPool, bus: &Arc<dyn Bus>, counted: &Arc<Counted>) {
    let published = Arc::new(Notify::new());
    let stuck: Arc<dyn Bus> = Arc::new(StuckAfterPublish {
        inner: bus.clone(),
        published: published.clone(),
    });
    let doomed = relay(db, stuck, counted);
    let running = tokio::spawn(async move { doomed.try_execute_task().await });
    published.notified().await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
}

const BACKLOG: usize = 50;

/// Within the bus's dedup window the repeat is dropped by the bus; after it (JetStream's
/// window is short here) the repeat reaches the consumer, which skips every one of them.
async fn a_relay_killed_between_publishing_and_marking(on: On, window: Duration) {
    let (db, _database) = fresh_db().await;
    let test_bus = TestBus::new(on, &db, window);
    let bus = test_bus.connect().await;
    let counted = Arc::new(Counted::default());
    let mut consumer = consumer(&db, bus.as_ref(), &counted).await;
    record_events(&db, BACKLOG).await;

    kill_a_relay_after_publishing(&db, &bus, &counted).await;
    let unpublished = "SELECT count(*) FROM outbox_events WHERE published_at IS NULL";
    assert_eq!(
        scalar(&db, unpublished).await,
        BACKLOG as i64,
        "nothing marked"
    );
    drain(&mut consumer).await;
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM effects").await,
        BACKLOG as i64
    );

    let window_passes = on == On::Nats && window < WINDOW;
    if window_passes {
        wait_until_the_bus_forgets(bus.as_ref()).await;
    }
    let relay = relay(&db, bus.clone(), &counted);
    assert_eq!(relay.try_execute_task().await.unwrap(), BACKLOG);
    assert_eq!(scalar(&db, unpublished).await, 0);
    drain(&mut consumer).await;

    assert_eq!(
        scalar(&db, "SELECT count(*) FROM effects").await,
        BACKLOG as i64
    );
    let (bus_dropped, consumer_skipped) = (
        counted.of(Counter::Republished),
        counted.of(Counter::DuplicateSkipped),
    );
    assert_eq!(
        bus_dropped + consumer_skipped,
        BACKLOG as u64,
        "every repeat was dropped by the bus or skipped by the consumer"
    );
    let expected = if window_passes {
        (0, BACKLOG as u64)
    } else {
        (BACKLOG as u64, 0)
    };
    assert_eq!((bus_dropped, consumer_skipped), expected);
    test_bus.done().await;
}

/// Waits until JetStream has forgotten the ids published so far: a probe, published after
/// them on a subject no consumer reads, is published again until it is no longer a duplicate.
async fn wait_until_the_bus_forgets(bus: &dyn Bus) {
    let probe = Message {
        subject: "probe".into(),
        ..message(serde_json::json!({}))
    };
    bus.publish(&probe).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while bus.publish(&probe).await.unwrap() == Published::Duplicate {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the window never passed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the consumer until a fetch finds nothing.
async fn drain(consumer: &mut once_events::consumer::Consumer) {
    while consumer
        .try_execute_task(Duration::from_millis(500))
        .await
        .unwrap()
        > 0
    {}
}

#[tokio::test]
async fn a_relay_killed_between_publishing_and_marking_republishes_on_postgres() {
    a_relay_killed_between_publishing_and_marking(On::Postgres, WINDOW).await;
}

#[tokio::test]
async fn a_relay_killed_between_publishing_and_marking_republishes_on_jetstream() {
    a_relay_killed_between_publishing_and_marking(On::Nats, WINDOW).await;
}

#[tokio::test]
async fn a_relay_killed_after_the_dedup_window_leaves_the_repeats_to_the_consumer() {
    a_relay_killed_between_publishing_and_marking(On::Nats, Duration::from_millis(200)).await;
}

/// Two relays start on one backlog at the same instant: every event is published once,
/// none twice (the bus would count a repeat as republished).
async fn two_relays_on_one_backlog_publish_each_event_once(on: On) {
    const EVENTS: usize = 3000;
    let (db, _database) = fresh_db().await;
    let counted = Arc::new(Counted::default());
    record_events(&db, EVENTS).await;
    let start = Arc::new(Barrier::new(2));
    let test_bus = TestBus::new(on, &db, WINDOW);
    let mut relays = Vec::new();
    for _ in 0..2 {
        let relay = relay(&db, test_bus.connect().await, &counted);
        let start = start.clone();
        relays.push(tokio::spawn(async move {
            start.wait().await;
            let mut published = 0;
            loop {
                match relay.try_execute_task().await.unwrap() {
                    0 => return published,
                    n => published += n,
                }
            }
        }));
    }
    let mut each = Vec::new();
    for relay in relays {
        each.push(relay.await.unwrap());
    }
    assert_eq!(each.iter().sum::<usize>(), EVENTS, "{each:?}");
    assert!(each.iter().all(|&n| n > 0), "both relays worked: {each:?}");
    assert_eq!(counted.of(Counter::Published), EVENTS as u64);
    assert_eq!(
        counted.of(Counter::Republished),
        0,
        "no event published twice"
    );
    if on == On::Postgres {
        let stored = scalar(&db, "SELECT count(*) FROM bus_messages").await;
        assert_eq!(stored, EVENTS as i64);
    }
    test_bus.done().await;
}

#[tokio::test]
async fn two_relays_on_one_backlog_publish_each_event_once_on_postgres() {
    two_relays_on_one_backlog_publish_each_event_once(On::Postgres).await;
}

#[tokio::test]
async fn two_relays_on_one_backlog_publish_each_event_once_on_jetstream() {
    two_relays_on_one_backlog_publish_each_event_once(On::Nats).await;
}
