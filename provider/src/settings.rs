//! What can change while the provider runs: where webhooks go, and the chaos knobs that let
//! tests exercise every defence of the merchant on demand (`GET`/`POST /v1/admin/chaos`).

use std::sync::{Arc, RwLock};

use axum::{
    extract::{FromRef, State},
    routing::get,
    Json, Router,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Chaos {
    /// Extra copies of every webhook delivery.
    pub duplicates: u32,
    /// Deliver due webhooks in random order instead of the order they happened.
    pub shuffle: bool,
    /// Hold every new webhook this long before its first attempt.
    pub delay_ms: u64,
    /// Chance (0 to 1) that a delivery attempt is lost on the way; it is retried later.
    pub drop_rate: f64,
    /// Lose every new webhook for good: none is ever queued (a merchant learns of the
    /// charge only from the charge's answer, or from the ledger).
    pub drop_webhooks: bool,
    /// Charge every successful charge twice: a second charge with the same reference and
    /// its own id, as a provider bug or a double submit past idempotency would.
    pub charge_twice: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Settings {
    pub webhook_url: String,
    pub chaos: Chaos,
}

/// Shared, changeable settings.
#[derive(Clone, Default)]
pub struct SharedSettings(Arc<RwLock<Settings>>);

impl SharedSettings {
    pub fn new(settings: Settings) -> Self {
        Self(Arc::new(RwLock::new(settings)))
    }

    pub fn get(&self) -> Settings {
        self.0.read().expect("settings lock").clone()
    }

    pub fn set_webhook_url(&self, url: impl Into<String>) {
        self.0.write().expect("settings lock").webhook_url = url.into();
    }

    pub fn set_chaos(&self, chaos: Chaos) {
        self.0.write().expect("settings lock").chaos = chaos;
    }
}

/// The knobs' routes, for any state that holds the settings.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    SharedSettings: FromRef<S>,
{
    Router::new().route("/v1/admin/chaos", get(show).post(update))
}

async fn show(State(settings): State<SharedSettings>) -> Json<Chaos> {
    Json(settings.get().chaos)
}

async fn update(State(settings): State<SharedSettings>, Json(chaos): Json<Chaos>) -> Json<Chaos> {
    tracing::info!(?chaos, "chaos knobs changed");
    settings.set_chaos(chaos.clone());
    Json(chaos)
}
