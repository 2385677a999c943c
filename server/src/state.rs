//! The state every handler shares, in a module of its own at the bottom of the server: route
//! modules import it from here, and only `startup` builds it.

use std::sync::Arc;

use app::site_files::SiteFiles;
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use once_axum::{AnswerCache, Waits};
use once_core::FingerprintKeys;
use sqlx::PgPool;

use once_events::bus::Bus;

use crate::{
    client_addr::TrustedProxies, config::Config, db::Readers, faults::Faults, journal,
    metrics::Metrics, payment_provider::Provider,
};

/// Everything a handler may need, shared: axum clones the state for every request, and a
/// profile of replays showed cloning and dropping these fields one by one among the busiest
/// work. Its fields are read through `Deref` (`state.db`).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// `FromRef<AppState>` for each field a handler extracts on its own (`State<PgPool>`).
macro_rules! from_state {
    ($($field:ident: $ty:ty),* $(,)?) => {
        $(impl FromRef<AppState> for $ty {
            fn from_ref(state: &AppState) -> Self {
                state.$field.clone()
            }
        })*
    };
}

from_state!(
    db: PgPool,
    readers: Readers,
    repeats: journal::RepeatLog,
    config: Arc<Config>,
    site: Arc<SiteFiles>,
    metrics: Arc<Metrics>,
    faults: Faults,
    provider: Provider,
    bus: Arc<dyn Bus>,
    waits: Waits,
    answers: Option<AnswerCache>,
    fingerprints: FingerprintKeys,
);

/// What [`AppState`] shares.
pub struct Shared {
    pub db: PgPool,
    /// For the first read of each idempotent request (`db::Readers`).
    pub readers: Readers,
    /// Where repeats are noted for the order journal (`journal::RepeatLog`).
    pub repeats: journal::RepeatLog,
    pub config: Arc<Config>,
    pub leptos: Arc<LeptosOptions>,
    /// The names of the site's files that pages link, read once at start: the shop's pages
    /// and the console's link the same stylesheet (`app::site_files`).
    pub site: Arc<SiteFiles>,
    pub metrics: Arc<Metrics>,
    pub faults: Faults,
    pub provider: Provider,
    pub bus: Arc<dyn Bus>,
    /// This instance's repeats waiting for their key's running request (`Prefer: wait`).
    pub waits: Waits,
    /// This instance's completed answers, for repeats (`ANSWER_CACHE_BYTES`; none when 0),
    /// forgotten when the database server changes (`db::ServerWatch`).
    pub answers: Option<AnswerCache>,
    /// The secrets request fingerprints are keyed with (`once_core::fingerprint`).
    pub fingerprints: FingerprintKeys,
}

/// For the Leptos routes, which take their options from the state by value.
impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        (*state.leptos).clone()
    }
}

/// For the extractors that find a request's client (`client_addr::ClientBucket`).
impl FromRef<AppState> for TrustedProxies {
    fn from_ref(state: &AppState) -> Self {
        state.config.limits.trusted_proxies.clone()
    }
}
