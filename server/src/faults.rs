//! Test-only fault injection, off unless `ONCE_FAULT_INJECTION=on`. With it on, a write
//! request may carry
//!
//! * `Once-Test-Hold: <gate>`: wait inside the business transaction (rows written, not yet
//!   committed) until `POST /_test/gates/<gate>/open`, so a test can kill the server, kill
//!   database connections, or let a lease expire at a known point;
//! * `Once-Test-Fail: transient`: fail with a 503 after the business writes;
//! * `Once-Test-Fail: read-only`: run the work on a database that refuses every write, so
//!   the work meets a database error through its own statements (a failover's 25006).
//!
//! A browser cannot add those headers, so `POST /_test/gates/<gate>/arm` makes the next
//! write request, whatever sends it, hold at `<gate>`. Opening a gate releases the requests
//! waiting there and forgets the gate; `POST /_test/reset` releases and disarms everything.
//!
//! With it off, the headers are ignored and the `/_test` routes do not exist.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::{FromRef, FromRequestParts, Path, State},
    http::{request::Parts, HeaderMap, StatusCode},
    routing::{get, post},
    Json, Router,
};
use once_axum::Waits;
use tokio::sync::watch;

use crate::error::ApiError;

/// How long a held request waits for its gate before giving up by itself.
const HOLD_LIMIT: Duration = Duration::from_secs(120);

#[derive(Clone, Default)]
pub struct Faults {
    enabled: bool,
    gates: Arc<Mutex<HashMap<String, Gate>>>,
    armed: Arc<Mutex<VecDeque<String>>>,
}

struct Gate {
    open: watch::Sender<bool>,
    waiting: usize,
}

/// The faults one request asked for.
#[derive(Clone, Debug, Default)]
pub struct FaultRequest {
    hold: Option<String>,
    fail: bool,
    read_only: bool,
}

impl FaultRequest {
    /// The faults `headers` ask for, read only when fault injection is on: with it off,
    /// the test headers are not even parsed.
    pub fn of(faults: &Faults, headers: &HeaderMap) -> Self {
        if !faults.enabled {
            return Self::default();
        }
        Self::from_headers(headers)
    }

    fn from_headers(headers: &HeaderMap) -> Self {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let fail = text("once-test-fail");
        Self {
            hold: text("once-test-hold"),
            fail: fail.as_deref() == Some("transient"),
            read_only: fail.as_deref() == Some("read-only"),
        }
    }

    /// Whether the request's work runs on a database that refuses every write.
    pub fn read_only(&self) -> bool {
        self.read_only
    }
}

/// The extractor of a request's test-time faults (empty with fault injection off).
impl<S> FromRequestParts<S> for FaultRequest
where
    S: Send + Sync,
    Faults: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&Faults::from_ref(state), &parts.headers))
    }
}

impl Faults {
    pub fn new(enabled: bool) -> Self {
        if enabled {
            tracing::warn!("fault injection is ON: for tests only, never in production");
        }
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Called by the executor's hook between the business writes and the commit
    /// (`idempotency::ShopHooks`).
    pub async fn inject(&self, request: &FaultRequest) -> Result<(), ApiError> {
        if !self.enabled {
            return Ok(());
        }
        let armed = || self.armed.lock().expect("armed lock").pop_front();
        if let Some(gate) = request.hold.clone().or_else(armed) {
            self.hold(&gate).await;
        }
        if request.fail {
            return Err(ApiError::Unavailable(anyhow::anyhow!(
                "injected transient failure"
            )));
        }
        Ok(())
    }

    async fn hold(&self, name: &str) {
        let mut open = {
            let mut gates = self.gates.lock().expect("gates lock");
            let gate = gates.entry(name.to_owned()).or_insert_with(|| Gate {
                open: watch::channel(false).0,
                waiting: 0,
            });
            gate.waiting += 1;
            gate.open.subscribe()
        };
        tracing::info!(gate = name, "request held at fault-injection gate");
        let released = tokio::time::timeout(HOLD_LIMIT, open.wait_for(|is_open| *is_open))
            .await
            .is_ok();
        // An opened gate is gone already; a gate that timed out still counts us.
        if !released {
            if let Some(gate) = self.gates.lock().expect("gates lock").get_mut(name) {
                gate.waiting = gate.waiting.saturating_sub(1);
            }
        }
    }

    /// Releases the requests waiting at `name` now. The gate is then forgotten, so the
    /// next request held at the same name waits again: gates never stay open between tests.
    fn open(&self, name: &str) {
        if let Some(gate) = self.gates.lock().expect("gates lock").remove(name) {
            gate.open.send_replace(true);
        }
    }

    /// Releases every held request and disarms every gate: each test starts from clean gates.
    fn reset(&self) {
        self.armed.lock().expect("armed lock").clear();
        for (_, gate) in self.gates.lock().expect("gates lock").drain() {
            gate.open.send_replace(true);
        }
    }

    fn waiting(&self, name: &str) -> usize {
        self.gates
            .lock()
            .expect("gates lock")
            .get(name)
            .map_or(0, |g| g.waiting)
    }

    /// The control routes, mounted only when fault injection is on.
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
        Faults: FromRef<S>,
        Waits: FromRef<S>,
    {
        if !self.enabled {
            return Router::new();
        }
        Router::new()
            .route("/_test/gates/{name}", get(gate_status))
            .route("/_test/gates/{name}/open", post(open_gate))
            .route("/_test/gates/{name}/arm", post(arm_gate))
            .route("/_test/reset", post(reset))
            .route("/_test/waiters", get(waiters))
    }
}

/// How many repeats wait for their key's running request on this instance.
async fn waiters(State(waits): State<Waits>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "waiting": waits.waiting() }))
}

async fn gate_status(
    State(faults): State<Faults>,
    Path(name): Path<String>,
) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "gate": name, "waiting": faults.waiting(&name) }))
}

async fn open_gate(State(faults): State<Faults>, Path(name): Path<String>) -> StatusCode {
    faults.open(&name);
    StatusCode::NO_CONTENT
}

async fn reset(State(faults): State<Faults>) -> StatusCode {
    faults.reset();
    StatusCode::NO_CONTENT
}

async fn arm_gate(State(faults): State<Faults>, Path(name): Path<String>) -> StatusCode {
    faults.armed.lock().expect("armed lock").push_back(name);
    StatusCode::NO_CONTENT
}
