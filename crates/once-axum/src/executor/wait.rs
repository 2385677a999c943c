//! `Prefer: wait` (docs/protocol.md, "Waiting for the original"): a repeat that finds its
//! key's request running waits, up to what it asked and what the executor allows, for that
//! request to finish, and is then answered exactly as a repeat at that moment would be: the
//! stored answer replayed, or, after a failure or a lapsed lease, the claim (it runs the
//! request itself). Still running at the deadline: 409, as without the preference. The
//! waiter is woken by the database's notification ([`once_pg::wake`]): it holds no
//! connection and polls nothing while it waits.

use std::time::Duration;

use axum::{
    http::{HeaderName, HeaderValue},
    response::Response,
};
use once_core::IdempotentRequest;
use once_pg::{
    store::{self, KeyRow},
    wake::{WaitRefused, Woken},
    Existing,
};
pub use once_pg::{WaitLimits, Wakeups};
use tokio::time::Instant;

use super::Executor;
use crate::hooks::{Counted, Hooks};

/// An executor's waits: the instance's [`Wakeups`] and the longest a request may wait,
/// whatever it asks for (keep it below the server's request timeout).
#[derive(Clone, Debug)]
pub struct Waits {
    wakeups: Wakeups,
    longest: Duration,
}

impl Waits {
    /// The waits of one instance on `db`: starts its listener (see [`Wakeups::start`]).
    pub fn start(db: sqlx::PgPool, limits: WaitLimits, longest: Duration) -> Self {
        Self {
            wakeups: Wakeups::start(db, limits),
            longest,
        }
    }

    /// Answers every waiting request 503 + `Retry-After` and waits no more: call it when a
    /// graceful stop begins, before the server waits for its requests to end.
    pub fn close(&self) {
        self.wakeups.close();
    }

    /// How many requests wait now on this instance.
    pub fn waiting(&self) -> usize {
        self.wakeups.waiting()
    }

    /// The wait `req` gets: what it asked for, at most the longest allowed.
    pub(crate) fn granted(&self, req: &IdempotentRequest) -> Option<Duration> {
        req.wait.map(|asked| self.granted_for(asked))
    }

    /// The wait a client that `asked` for one gets: at most the longest allowed.
    pub fn granted_for(&self, asked: Duration) -> Duration {
        asked.min(self.longest)
    }

    /// Waits for the key of `req`, found running, to change. `until`: the deadline.
    pub(crate) async fn for_original(
        &self,
        req: &IdempotentRequest,
        until: Instant,
    ) -> Waited<Existing> {
        let settled = |row| match store::judge(row, req) {
            Existing::InProgress => None,
            changed => Some(changed),
        };
        self.until_settled(&req.scope, req.key.as_str(), until, settled)
            .await
    }

    /// Waits until a read of `key`'s row in `scope` is `settled` (`Some`), or `until`.
    pub(crate) async fn until_settled<T>(
        &self,
        scope: &str,
        key: &str,
        until: Instant,
        settled: impl Fn(Option<KeyRow>) -> Option<T>,
    ) -> Waited<T> {
        let mut waiter = match self.wakeups.wait_for(scope, key).await {
            Ok(waiter) => waiter,
            Err(WaitRefused::Stopping) => return Waited::Stopping,
            Err(WaitRefused::Store(e)) => {
                tracing::warn!(%key, error = %e, "could not wait for a running key");
                return Waited::Refused;
            }
            // Full, or a refusal this version does not know: answered at once, as before.
            Err(_) => return Waited::Refused,
        };
        loop {
            match waiter.next(until).await {
                Woken::Row(row) => match settled(row) {
                    Some(changed) => return Waited::Changed(changed),
                    None => continue,
                },
                Woken::Stopping => return Waited::Stopping,
                _ => return Waited::Running,
            }
        }
    }
}

/// How a wait for a running key ended.
pub(crate) enum Waited<T> {
    /// The key is no longer running: what it holds now.
    Changed(T),
    /// Still running at the deadline (or no wait was asked for or allowed).
    Running,
    /// Still running, and the request may not wait (no room, or the key could not be
    /// marked): answered at once, without `Preference-Applied`.
    Refused,
    /// The instance is stopping.
    Stopping,
}

impl<H: Hooks> Executor<H> {
    /// The same executor, letting a request that asks for it (`Prefer: wait=N`) wait for
    /// its key's running request instead of being told 409 at once.
    pub fn with_waits(mut self, waits: Waits) -> Self {
        self.waits = Some(waits);
        self
    }

    /// Waits, if `req` asked to and this executor lets it, for its running key to change.
    pub(crate) async fn wait_for_original(&self, req: &IdempotentRequest) -> Waited<Existing> {
        let Some(waits) = &self.waits else {
            return Waited::Running;
        };
        let Some(until) = req.wait_until(waits.longest) else {
            return Waited::Running;
        };
        let waited = waits.for_original(req, Instant::from_std(until)).await;
        self.hooks.count(Counted::Waited);
        waited
    }

    /// The wait `req` gets from this executor, if it asked for one.
    pub(crate) fn granted_wait(&self, req: &IdempotentRequest) -> Option<Duration> {
        self.waits.as_ref().and_then(|w| w.granted(req))
    }
}

/// Marks an answer given without the wait the request asked for (see [`not_applied`]).
#[derive(Clone, Copy, Debug)]
struct NotApplied;

/// `response`, given at once although its request asked to wait: [`applied`] then says
/// nothing (RFC 7240: `Preference-Applied` names only what was honoured).
pub(crate) fn not_applied(mut response: Response) -> Response {
    response.extensions_mut().insert(NotApplied);
    response
}

/// `response` saying which wait the server applied (`Preference-Applied: wait=N`, RFC
/// 7240), when it `granted` one: for a route of the application's own that waits.
pub fn applied(granted: Option<Duration>, mut response: Response) -> Response {
    if response.extensions().get::<NotApplied>().is_some() {
        return response;
    }
    // `wait=0` asks for no wait, and gets none; a grant under a second cannot be said in
    // the header's whole seconds without claiming a wait of 0, so it is not said at all.
    if let Some(granted) = granted.filter(|g| g.as_secs() > 0) {
        let applied = HeaderValue::from_str(&format!("wait={}", granted.as_secs()));
        if let Ok(applied) = applied {
            response
                .headers_mut()
                .insert(HeaderName::from_static("preference-applied"), applied);
        }
    }
    response
}
