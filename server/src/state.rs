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
    metrics::Metrics, provider_client::ProviderClient,
};

/// Everything a handler may need. axum clones it for every request, so whatever is more
/// than a handle sits behind an `Arc`.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub db: PgPool,
    /// For the first read of each idempotent request (`db::Readers`).
    pub readers: Readers,
    /// Where repeats are noted for the order journal (`journal::RepeatLog`).
    pub repeats: journal::RepeatLog,
    pub config: Arc<Config>,
    #[from_ref(skip)]
    pub leptos: Arc<LeptosOptions>,
    /// The names of the site's files that pages link, read once at start: the shop's pages
    /// and the console's link the same stylesheet (`app::site_files`).
    pub site: Arc<SiteFiles>,
    pub metrics: Arc<Metrics>,
    pub faults: Faults,
    pub provider: ProviderClient,
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
