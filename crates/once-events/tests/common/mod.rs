//! What the chain's tests share: a fresh database, a handler whose effects are rows, counters
//! that remember what the chain reported, and a relay and consumer wired to one bus.

#![allow(dead_code)] // each test binary uses its own part

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use once_events::{
    bus::{nats::NatsBus, Bus, Message},
    consumer::{Consumer, RetryPolicy},
    outbox::{self, Event},
    relay::Relay,
    BusConfig, Counter, Counters, Handler, HandlerError,
};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

pub const SUBJECT: &str = "thing.happened";

/// A fresh database with the crate's migration and an `effects` table for [`Recorder`], and
/// the handle that drops it at the end of its test, passed or failed. Named like the shop's
/// test databases, so that scripts/test clears any a killed run left.
pub async fn fresh_db() -> (PgPool, DropsDatabase) {
    let admin = std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432".into());
    let name = format!("once_test_events_{}", Uuid::new_v4().simple());
    // Before the database exists, so a migration that fails drops it too.
    let guard = DropsDatabase {
        admin: admin.clone(),
        name: name.clone(),
    };
    let mut conn = PgConnection::connect(&format!("{admin}/postgres"))
        .await
        .expect("admin connection");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("database created");
    let db = PgPool::connect(&format!("{admin}/{name}"))
        .await
        .expect("connection");
    once_events::MIGRATOR.run(&db).await.expect("migrated");
    sqlx::query("CREATE TABLE effects (event_id uuid NOT NULL)")
        .execute(&db)
        .await
        .expect("effects table");
    (db, guard)
}

/// Drops its database when it goes. `drop` cannot await and may run on the test's runtime:
/// the DROP runs on a thread and a runtime of its own; FORCE ends the pools' connections.
pub struct DropsDatabase {
    admin: String,
    name: String,
}

impl Drop for DropsDatabase {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&format!("{admin}/postgres")).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

pub async fn scalar(db: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.expect(sql)
}

/// Remembers what the chain reports, as an app's metrics would count it.
#[derive(Default)]
pub struct Counted(Mutex<Vec<Counter>>);

impl Counted {
    pub fn of(&self, counter: Counter) -> u64 {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|&&c| c == counter)
            .count() as u64
    }
}

impl Counters for Counted {
    fn count(&self, counter: Counter) {
        self.0.lock().unwrap().push(counter);
    }
}

/// A handler whose effect is a row in `effects`; an event whose payload says `"poison"` is
/// refused as poison.
pub struct Recorder;

#[async_trait]
impl Handler for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn subject(&self) -> &'static str {
        SUBJECT
    }

    async fn apply(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError> {
        for event in events {
            sqlx::query("INSERT INTO effects (event_id) VALUES ($1)")
                .bind(event.id)
                .execute(&mut *tx)
                .await?;
            if event.payload.get("poison").is_some() {
                return Err(HandlerError::Poison("this event is poison".into()));
            }
        }
        Ok(())
    }
}

/// Records `n` events in the outbox, each in its own transaction as an app would; their ids.
pub async fn record_events(db: &PgPool, n: usize) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let mut tx = db.begin().await.unwrap();
        let payload = serde_json::json!({});
        ids.push(
            outbox::record(&mut tx, "thing", Uuid::new_v4(), SUBJECT, payload)
                .await
                .unwrap(),
        );
        tx.commit().await.unwrap();
    }
    ids
}

/// A message carrying an event of [`SUBJECT`] with `payload`.
pub fn message(payload: serde_json::Value) -> Message {
    Event {
        id: Uuid::new_v4(),
        event_type: SUBJECT.into(),
        aggregate_type: "thing".into(),
        aggregate_id: Uuid::new_v4(),
        payload,
        created_at: chrono::Utc::now(),
    }
    .to_message()
}

/// The local NATS server.
pub fn nats_url() -> String {
    std::env::var("TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// A JetStream stream of its own for one test, dropping repeats for `duplicate_window`.
pub fn nats_config(duplicate_window: Duration) -> BusConfig {
    let tag = Uuid::new_v4().simple().to_string();
    BusConfig {
        nats_url: Some(nats_url()),
        nats_stream: format!("ONCE_TEST_{tag}"),
        nats_subject_prefix: format!("once_test_{tag}.events"),
        poll_every: Duration::from_millis(100),
        retention: Duration::from_secs(600),
        nats_duplicate_window: duplicate_window,
        nats_replicas: 1,
    }
}

/// A connection to the JetStream bus of `config` (each call is another process's).
pub async fn nats_bus(config: &BusConfig) -> NatsBus {
    NatsBus::connect(&nats_url(), config).await.expect("nats")
}

pub fn relay(db: &PgPool, bus: Arc<dyn Bus>, counted: &Arc<Counted>) -> Relay {
    Relay {
        db: db.clone(),
        bus,
        metrics: counted.clone(),
    }
}

/// The [`Recorder`]'s consumer on `bus`, with quick retries.
pub async fn consumer(db: &PgPool, bus: &dyn Bus, counted: &Arc<Counted>) -> Consumer {
    let handler: Arc<dyn Handler> = Arc::new(Recorder);
    Consumer {
        db: db.clone(),
        subscription: bus
            .subscribe(&Consumer::spec(handler.as_ref(), Duration::from_secs(30)))
            .await
            .unwrap(),
        handler,
        policy: RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(100),
        },
        metrics: counted.clone(),
        pause_before_ack: Duration::ZERO,
        batch: once_events::consumer::BATCH,
    }
}
