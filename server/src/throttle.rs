//! Rate limits: how fast one client may ask and open sessions, and how fast one session may
//! write. Past a limit the answer is 429 problem+json `rate-limited` with `Retry-After`, which the shop's
//! own pages honour before they retry (docs/design.md, "Hostile traffic").
//!
//! The limits live in this process's memory (a GCRA bucket per client address and per
//! session cookie, `governor`): they protect this instance's resources and carry no
//! correctness. What a session may *store* is bounded by quotas the database counts
//! (`quota`), so that they hold across instances.

use std::{net::IpAddr, num::NonZeroU32, sync::Arc, time::Duration};

use axum::{
    extract::{Request, State},
    http::Method,
    middleware::Next,
    response::{IntoResponse, Response},
};
use governor::{clock::Clock, DefaultKeyedRateLimiter, Quota, RateLimiter};

use tower_sessions::{session::Id, Session};

use crate::{
    client_addr::{bucket_of, client_addr, TrustedProxies},
    config::{Limits, Rate},
    error::ApiError,
};

/// A rate's quota for the limiter; `None` when the rate turns the limit off.
fn quota(rate: Rate) -> Option<Quota> {
    let per_second = NonZeroU32::new(rate.per_second)?;
    let burst = NonZeroU32::new(rate.burst.max(rate.per_second))?;
    Some(Quota::per_second(per_second).allow_burst(burst))
}

/// The limits of this process, shared by every request.
pub struct Throttle {
    per_client: Option<DefaultKeyedRateLimiter<IpAddr>>,
    writes_per_session: Option<DefaultKeyedRateLimiter<i128>>,
    new_sessions_per_client: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trusted: TrustedProxies,
}

impl Throttle {
    pub fn new(limits: &Limits) -> Arc<Self> {
        let hourly = NonZeroU32::new(limits.new_sessions_per_client_per_hour).map(Quota::per_hour);
        Arc::new(Self {
            per_client: quota(limits.per_client).map(RateLimiter::keyed),
            writes_per_session: quota(limits.writes_per_session).map(RateLimiter::keyed),
            new_sessions_per_client: hourly.map(RateLimiter::keyed),
            trusted: limits.trusted_proxies.clone(),
        })
    }

    /// Forgets buckets that are full again, so memory follows the clients of the last
    /// moments, not every client ever seen.
    pub fn forget_idle(&self) {
        if let Some(limiter) = &self.per_client {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.writes_per_session {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.new_sessions_per_client {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// How long a request from its client must wait, if the client is over its rate.
    fn client_wait(&self, request: &Request) -> Option<Duration> {
        let client = client_addr(request.headers(), request.extensions(), &self.trusted)?;
        let limiter = self.per_client.as_ref()?;
        limiter.check_key(&bucket_of(client)).err().map(wait)
    }

    /// How long the client of `request` must wait before it may open another session, if it
    /// opened as many as it may this hour. Asked only when a session would be opened.
    pub fn new_session_wait(&self, request: &Request) -> Option<Duration> {
        let client = client_addr(request.headers(), request.extensions(), &self.trusted)?;
        let limiter = self.new_sessions_per_client.as_ref()?;
        limiter.check_key(&bucket_of(client)).err().map(wait)
    }

    /// How long a write of `session` must wait, if the session is over its rate.
    fn session_wait(&self, session: &Id) -> Option<Duration> {
        let limiter = self.writes_per_session.as_ref()?;
        limiter.check_key(&session.0).err().map(wait)
    }
}

/// How long a refused request should wait: whole seconds, at least one.
fn wait(not_until: governor::NotUntil<governor::clock::QuantaInstant>) -> Duration {
    let clock = governor::clock::DefaultClock::default();
    let wait = not_until.wait_time_from(clock.now());
    Duration::from_secs(wait.as_secs_f64().ceil().max(1.0) as u64)
}

/// 429 `rate-limited`, come back after `retry_after`.
pub fn too_many(retry_after: Duration) -> Response {
    ApiError::TooManyRequests {
        problem: "rate-limited",
        retry_after_secs: retry_after.as_secs(),
        detail: "too many requests from this client or session; try again after Retry-After \
                 seconds"
            .to_owned(),
    }
    .into_response()
}

/// Middleware around everything: refuses a request over its client's rate before anything
/// else reads it.
pub async fn limit_clients(
    State(throttle): State<Arc<Throttle>>,
    request: Request,
    next: Next,
) -> Response {
    match throttle.client_wait(&request) {
        None => next.run(request).await,
        Some(retry_after) => too_many(retry_after),
    }
}

/// Middleware inside the session layer: refuses a write over its session's rate. The
/// session is the one the session layer read from the cookie (a fixed-size id, whatever
/// the cookie header held), so the bucket is the session's and no cookie spelling makes a
/// new one; a write without a session is refused further in anyway.
pub async fn limit_session_writes(
    State(throttle): State<Arc<Throttle>>,
    request: Request,
    next: Next,
) -> Response {
    let write = !matches!(*request.method(), Method::GET | Method::HEAD);
    let session = request.extensions().get::<Session>().and_then(Session::id);
    match session
        .filter(|_| write)
        .and_then(|id| throttle.session_wait(&id))
    {
        None => next.run(request).await,
        Some(retry_after) => too_many(retry_after),
    }
}

/// Runs [`Throttle::forget_idle`] every `every` until the task is aborted.
pub async fn run_forgetting(throttle: Arc<Throttle>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        throttle.forget_idle();
    }
}
