//! Rate limits: how fast one client may ask, and how fast one session may write. Past a
//! limit the answer is 429 problem+json `rate-limited` with `Retry-After`, which the shop's
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

use crate::{
    client_addr::{client_addr, TrustedProxies},
    error::ApiError,
    session::COOKIE_NAME,
};

/// A sustained rate with a burst on top; a rate of 0 turns the limit off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}

impl Rate {
    fn quota(self) -> Option<Quota> {
        let per_second = NonZeroU32::new(self.per_second)?;
        let burst = NonZeroU32::new(self.burst.max(self.per_second))?;
        Some(Quota::per_second(per_second).allow_burst(burst))
    }
}

/// The limits of this process, shared by every request.
pub struct Throttle {
    per_client: Option<DefaultKeyedRateLimiter<IpAddr>>,
    writes_per_session: Option<DefaultKeyedRateLimiter<String>>,
    trusted: TrustedProxies,
}

impl Throttle {
    pub fn new(per_client: Rate, writes_per_session: Rate, trusted: TrustedProxies) -> Arc<Self> {
        Arc::new(Self {
            per_client: per_client.quota().map(RateLimiter::keyed),
            writes_per_session: writes_per_session.quota().map(RateLimiter::keyed),
            trusted,
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
    }

    /// How long the request must wait, if it is over a limit.
    fn wait_for(&self, request: &Request) -> Option<Duration> {
        let client = client_addr(request.headers(), request.extensions(), &self.trusted);
        if let (Some(limiter), Some(client)) = (&self.per_client, client) {
            if let Err(not_until) = limiter.check_key(&client) {
                return Some(wait(not_until));
            }
        }
        let write = !matches!(*request.method(), Method::GET | Method::HEAD);
        if let (true, Some(limiter)) = (write, &self.writes_per_session) {
            if let Some(session) = session_cookie(request) {
                return limiter.check_key(&session).err().map(wait);
            }
        }
        None
    }
}

/// How long a refused request should wait: whole seconds, at least one.
fn wait(not_until: governor::NotUntil<governor::clock::QuantaInstant>) -> Duration {
    let clock = governor::clock::DefaultClock::default();
    let wait = not_until.wait_time_from(clock.now());
    Duration::from_secs(wait.as_secs_f64().ceil().max(1.0) as u64)
}

/// The shop's session cookie of a request, as sent: made-up values count too, each in a
/// bucket of its own, and the per-client limit bounds how many a client can make up.
fn session_cookie(request: &Request) -> Option<String> {
    request
        .headers()
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
}

/// Middleware: refuses a request over a limit before anything else reads it.
pub async fn limit(
    State(throttle): State<Arc<Throttle>>,
    request: Request,
    next: Next,
) -> Response {
    match throttle.wait_for(&request) {
        None => next.run(request).await,
        Some(retry_after) => {
            tracing::debug!(uri = %request.uri(), "rate limited");
            ApiError::TooManyRequests {
                problem: "rate-limited",
                retry_after_secs: retry_after.as_secs(),
                detail: "too many requests from this client or session; try again after \
                         Retry-After seconds"
                    .to_owned(),
            }
            .into_response()
        }
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
