//! The shop's side of the Idempotency-Key protocol (docs/design.md, "The idempotency
//! protocol"). The protocol itself is the `once-*` crates': the key and the stored-outcome
//! rule (`once_core`), the key table (`once_pg`), the executor (`once_axum`). Here is what
//! the shop plugs into them:
//!
//! * its scope, the session: the first read of every keyed request also reads the session
//!   store, in the same statement ([`first_read`]), and a write for a session the store
//!   does not know runs nothing;
//! * its metrics, and its test-time faults ([`ShopHooks`]);
//! * the order journal's request entries: the request that completed, written in the
//!   transaction that stores its answer, and each repeat answered from the table, noted
//!   off the answer's path (`crate::journal`);
//! * [`status`]: the key-status route, documented in the shop's API reference.

mod first_read;
pub mod status;

use std::sync::Arc;

use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};
use once_axum::{faults::ReadOnlyWork, Counted, Executor, Hooks, KeyRead, Repeat};
use once_core::{IdempotentRequest, KeyedOperation, StoredResponse};
use sqlx::{PgConnection, PgPool};

use crate::{
    db::Readers,
    error::ApiError,
    faults::{FaultRequest, Faults},
    journal,
    metrics::Metrics,
    state::AppState,
};

/// The shop's executor.
pub type Idempotency = Executor<ShopHooks>;

/// The `Idempotency-Key` extractor, refusing in the shop's problem format.
pub type RequestKey = once_axum::RequestKey<ApiError>;

/// What the shop plugs into the executor. `request_faults` are the test-time faults of
/// one request ([`Idempotency`] values are made per request with [`with_faults`]); with
/// fault injection off they are empty and nothing reads them.
#[derive(Clone)]
pub struct ShopHooks {
    readers: Readers,
    repeats: journal::RepeatLog,
    metrics: Arc<Metrics>,
    faults: Faults,
    request_faults: FaultRequest,
    /// Set when the shop asks again for itself while a request runs (the checkout form
    /// waiting for the first submit): its 409s were sent to no client, and are not noted.
    asking_for_itself: bool,
}

impl FromRef<AppState> for Idempotency {
    fn from_ref(state: &AppState) -> Self {
        let hooks = ShopHooks {
            readers: state.readers.clone(),
            repeats: state.repeats.clone(),
            metrics: state.metrics.clone(),
            faults: state.faults.clone(),
            request_faults: FaultRequest::default(),
            asking_for_itself: false,
        };
        let executor = Executor::new(state.db.clone(), state.config.idempotency_lease)
            .with_keys_per_hour(state.config.limits.keys_per_hour)
            .with_waits(state.waits.clone())
            .with_hooks(hooks);
        match &state.answers {
            Some(cache) => executor.with_answer_cache(cache.clone()),
            None => executor,
        }
    }
}

/// The shop's executor for this request, with the request's test-time faults bound.
pub struct RequestExecutor(pub Idempotency);

impl FromRequestParts<AppState> for RequestExecutor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let faults = FaultRequest::of(&state.faults, &parts.headers);
        Ok(Self(with_faults(&Idempotency::from_ref(state), faults)))
    }
}

/// The executor the shop uses to ask again for itself (see `ShopHooks::asking_for_itself`).
pub fn asking_for_itself(idem: &Idempotency) -> Idempotency {
    let mut idem = idem.clone();
    idem.hooks.asking_for_itself = true;
    idem
}

/// The executor for one request that carries test-time faults: held or failed by the
/// hooks, or given a database that refuses writes (`once_axum::faults::ReadOnlyWork`).
pub fn with_faults(idem: &Idempotency, faults: FaultRequest) -> Idempotency {
    let mut idem = idem.clone();
    if faults.read_only() {
        idem = idem.with_faults(ReadOnlyWork::default());
    }
    idem.hooks.request_faults = faults;
    idem
}

impl Hooks for ShopHooks {
    type Error = ApiError;

    async fn read_key(&self, _db: &PgPool, req: &IdempotentRequest) -> Result<KeyRead, ApiError> {
        let first = first_read::read(&self.readers, req).await?;
        if !first.session_known {
            return Err(ApiError::SessionRequired);
        }
        Ok(first.key)
    }

    fn count(&self, what: Counted) {
        let m = &self.metrics;
        let counter = match what {
            Counted::Execution => &m.executions,
            Counted::Replay => &m.replays,
            Counted::InProgress => &m.in_progress,
            Counted::KeyReused => &m.key_reused,
            Counted::Takeover => &m.takeovers,
            Counted::RetryAfterFailure => &m.retries_after_failure,
            Counted::Fenced => &m.fenced,
            Counted::Remembered => &m.remembered,
            _ => return,
        };
        Metrics::inc(counter);
    }

    async fn before_commit(&self, _req: &IdempotentRequest) -> Result<(), ApiError> {
        self.faults.inject(&self.request_faults).await
    }

    async fn on_complete(
        &self,
        tx: &mut PgConnection,
        req: &IdempotentRequest,
        stored: &StoredResponse,
    ) -> Result<(), sqlx::Error> {
        journal::request(tx, req, stored).await
    }

    async fn on_repeat(&self, at: KeyedOperation<'_>, repeat: Repeat<'_>) {
        if self.asking_for_itself && matches!(repeat, Repeat::InProgress) {
            return;
        }
        self.repeats.note(at, repeat);
    }
}

impl ShopHooks {
    /// A key reused on `order`, refused by the shop rather than the executor (see
    /// `journal::RepeatLog::note_reused_on`): noted and counted as the executor's are.
    pub fn reused_on(&self, at: KeyedOperation<'_>, order: uuid::Uuid) {
        self.repeats.note_reused_on(at, order);
        self.count(Counted::KeyReused);
    }
}
