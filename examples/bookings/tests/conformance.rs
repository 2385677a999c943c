//! The example passes the protocol's conformance suite, run over HTTP against it on a fresh
//! database of its own, for both of its operations: booking, and cancelling a booking (an
//! operation on a resource its path names).

use std::{collections::HashMap, time::Duration};

use once_axum::conformance::{run_all, Call, Fault, Gates, Subject};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::sync::Mutex;
use uuid::Uuid;

mod common;
use common::{start, LEASE};

struct Bookings {
    base: String,
    db: PgPool,
    gates: Gates,
    http: reqwest::Client,
}

/// A hotel: its API key, and the bookings made for it to be cancelled, by target.
struct Hotel {
    api_key: String,
    to_cancel: Mutex<HashMap<u32, Uuid>>,
}

impl Bookings {
    /// The booking `target` of `hotel`, made directly in the table (not an effect). The map
    /// stays locked while the row is made: a storm's requests all name the one booking, even
    /// when the first of them has already cancelled it (a cancelled night can be booked again).
    async fn booking(&self, hotel: &Hotel, target: u32) -> Uuid {
        let mut to_cancel = hotel.to_cancel.lock().await;
        if let Some(id) = to_cancel.get(&target) {
            return *id;
        }
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO bookings (owner, room, night, guest) VALUES ($1, $2, '2030-01-01', 'fixture')
         ON CONFLICT (owner, room, night) WHERE cancelled_at IS NULL DO UPDATE SET guest = excluded.guest RETURNING id",
        )
        .bind(&hotel.api_key)
        .bind(1000 + target as i32)
        .fetch_one(&self.db)
        .await
        .expect("a booking to cancel");
        to_cancel.insert(target, id);
        id
    }
}

impl Subject for Bookings {
    type Scope = Hotel;

    fn operations(&self) -> usize {
        2
    }

    fn has_target(&self, op: usize) -> bool {
        op == 1
    }

    async fn new_scope(&self) -> Hotel {
        Hotel { api_key: Uuid::new_v4().to_string(), to_cancel: Mutex::default() }
    }

    fn body(&self, op: usize, n: u32) -> Value {
        match op {
            0 => json!({ "room": n, "night": "2027-01-01", "guest": "Ada" }),
            _ => json!({ "reason": format!("plans changed, {n}") }),
        }
    }

    fn refusal(&self, op: usize) -> Option<Value> {
        // A room the database refuses (its check constraint): the request's own fault.
        (op == 0).then(|| json!({ "room": -1, "night": "2027-01-01", "guest": "Ada" }))
    }

    async fn send(&self, hotel: &Hotel, call: Call<'_>) -> reqwest::Response {
        if let Some(key) = call.key {
            match &call.fault {
                Fault::Hold(gate) => self.gates.hold(key, gate),
                Fault::FailTransient => self.gates.fail(key),
                Fault::ReadOnly => self.gates.read_only(key),
                Fault::HoldThenFail(gate) => {
                    self.gates.hold(key, gate);
                    self.gates.fail(key);
                }
                _ => {}
            }
        }
        let path = match call.op {
            0 => "/bookings".to_owned(),
            _ => format!("/bookings/{}/cancel", self.booking(hotel, call.target).await),
        };
        let mut request = self.http.post(format!("{}{path}", self.base)).header("x-api-key", &hotel.api_key);
        if let Some(key) = call.key {
            request = request.header("idempotency-key", key);
        }
        // The example does not take `Prefer: wait` (no `Executor::with_waits`): the suite
        // checks that a repeat asking to wait is still answered 409 at once.
        if let Some(prefer) = call.prefer() {
            request = request.header("prefer", prefer);
        }
        request.json(call.body).send().await.expect("the example answers")
    }

    async fn key_status(&self, hotel: &Hotel, key: &str) -> reqwest::Response {
        let url = format!("{}/idempotency-keys/{key}", self.base);
        self.http.get(url).header("x-api-key", &hotel.api_key).send().await.expect("the example answers")
    }

    async fn effects(&self, hotel: &Hotel) -> u64 {
        let count: i64 = sqlx::query_scalar(
            "SELECT count(*) FILTER (WHERE guest <> 'fixture') + count(cancelled_at) FROM bookings WHERE owner = $1",
        )
        .bind(&hotel.api_key)
        .fetch_one(&self.db)
        .await
        .expect("count the hotel's effects");
        count as u64
    }

    async fn waiting(&self, gate: &str) -> usize {
        self.gates.waiting(gate)
    }

    async fn open(&self, gate: &str) {
        self.gates.open(gate)
    }

    async fn claims(&self, key: &str) -> Option<usize> {
        Some(self.gates.claims(key))
    }

    fn lease(&self) -> Duration {
        LEASE
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookings_pass_the_conformance_suite_for_both_operations() {
    let gates = Gates::default();
    let (test_db, base) = start(|executor| executor.with_faults(gates.clone())).await;
    let db = test_db.pool.clone();
    run_all(&Bookings { base, db, gates, http: reqwest::Client::new() }).await;
}
