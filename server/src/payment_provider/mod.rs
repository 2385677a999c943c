//! The boundary between the payment flow and the company that moves the money. Payments,
//! callbacks, settling and the reconciler talk to [`PaymentProvider`] only; two adapters
//! implement it, chosen by `PAYMENT_PROVIDER` (docs/payments.md, "Going live with Stripe"):
//!
//! * [`sandbox`], the provider program of this repository (the chaos harness's);
//! * [`stripe`], Stripe's PaymentIntents over HTTP.
//!
//! Both speak of a *charge*: what the provider took (or refused) for one payment attempt,
//! named by an id of the provider's (a sandbox charge, a Stripe PaymentIntent), with the
//! attempt's id as its `reference`. Everything above the boundary decides on charges.

mod http;
pub mod sandbox;
mod signature;
pub mod stripe;

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{config::Config, error::ApiError};
pub use signature::SignatureError;

/// A charge's status as the flow reads it: `succeeded`, `failed`, or anything else, which
/// means the outcome is not known yet (the attempt stays pending).
pub const SUCCEEDED: &str = "succeeded";
/// See [`SUCCEEDED`].
pub const FAILED: &str = "failed";

/// What the provider took, or refused, for one attempt.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Charge {
    /// The provider's id of the charge (a Stripe PaymentIntent's id).
    pub id: String,
    /// [`SUCCEEDED`], [`FAILED`], or an outcome not known yet.
    pub status: String,
    pub amount_cents: i64,
    /// Upper case, as orders store it.
    pub currency: String,
    pub failure_code: Option<String>,
    /// Our reference: the payment attempt id.
    #[serde(default)]
    pub reference: String,
    pub created_at: Option<DateTime<Utc>>,
    /// Set while the charge waits for the shopper's bank (3-D Secure): the secret the
    /// shopper's browser finishes that step with (a Stripe intent's `client_secret`).
    #[serde(skip)]
    pub authentication: Option<String>,
}

/// How the shopper pays: the provider decides which it takes.
#[derive(Debug)]
pub enum Instrument {
    /// A card number, sent to the provider by the server (the sandbox only).
    CardNumber(String),
    /// A payment method the provider's script made in the browser (Stripe): the card never
    /// reaches the shop's server.
    PaymentMethod(String),
}

/// Which [`Instrument`] a provider takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrumentKind {
    CardNumber,
    PaymentMethod,
}

/// What one charge asks for: the attempt (its id keys the provider's calls), the amount, the
/// instrument, and the provider's object the attempt already has (recorded by an earlier try).
pub struct ChargeOrder<'a> {
    pub payment_id: Uuid,
    pub order_id: Uuid,
    pub amount_cents: i64,
    pub currency: &'a str,
    pub instrument: &'a Instrument,
    pub intent_id: Option<String>,
}

/// An attempt, as the provider is asked about it.
pub struct AttemptRef<'a> {
    pub payment_id: Uuid,
    /// The provider's object recorded for it, if the provider makes one before charging.
    pub intent_id: Option<&'a str>,
}

/// What the payment flow lets the adapter do while it charges: each is a recovery point.
#[async_trait]
pub trait CallGate: Send {
    /// Stamps the attempt before a call that may charge it; false when the attempt was
    /// closed meanwhile, and nothing may be charged.
    async fn may_call(&mut self) -> Result<bool, ApiError>;
    /// Records the provider's object for the attempt before it is confirmed; returns the one
    /// recorded (an earlier try's, if it won).
    async fn record_intent(&mut self, intent_id: &str) -> Result<String, ApiError>;
}

/// One page of the provider's ledger of succeeded charges, oldest or newest first.
#[derive(Debug)]
pub struct LedgerPage {
    pub data: Vec<Charge>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// A callback the provider sent, verified and understood.
pub struct ReceivedEvent {
    /// What deduplicates deliveries: the same value for every delivery of one event.
    pub delivery_id: String,
    pub event_id: String,
    pub event_type: String,
    pub about: EventAbout,
    /// The body as JSON, kept with the callback for operators.
    pub payload: serde_json::Value,
}

/// What a callback says about a charge.
pub enum EventAbout {
    Succeeded(Charge),
    Failed(Charge),
    /// A kind the shop does not act on.
    Other,
    /// A kind the shop knows whose data is not that kind's shape.
    Malformed,
}

/// Why a callback was refused before anything was stored.
#[derive(Debug, thiserror::Error)]
pub enum WebhookRefusal {
    #[error(transparent)]
    Signature(#[from] SignatureError),
    #[error("the callback body is not valid: {0}")]
    Invalid(String),
}

/// A payment provider, as the payment flow uses it.
#[async_trait]
pub trait PaymentProvider: Send + Sync {
    /// The instrument this provider takes.
    fn instrument(&self) -> InstrumentKind;

    /// The route its callbacks come to (`/webhooks/…`).
    fn webhook_path(&self) -> &'static str;

    /// Charges the attempt, retrying transient failures under keys derived from the attempt,
    /// so a retry (ours, or of the whole request after a crash) never charges twice.
    /// `Ok(None)`: the attempt was closed meanwhile and was not charged by us.
    async fn charge(
        &self,
        order: &ChargeOrder<'_>,
        gate: &mut dyn CallGate,
    ) -> Result<Option<Charge>, ApiError>;

    /// Every charge the provider made for an attempt whose request is over, once nothing can
    /// charge it any more: what could still be confirmed is stopped first (a Stripe intent
    /// not yet confirmed, or waiting for authentication, is cancelled). How an attempt
    /// whose outcome is unknown is settled: by asking, never guessing (`payments::settle`).
    async fn final_charges(&self, attempt: &AttemptRef<'_>) -> Result<Vec<Charge>, ApiError>;

    /// The attempt's charge as the provider has it now, changing nothing: how the shop
    /// learns what the shopper's bank answered (docs/payments.md, "3-D Secure"). `None`
    /// when the provider has nothing to say before its callback (the sandbox charges in one
    /// call, and never asks for authentication).
    async fn current_charge(&self, _attempt: &AttemptRef<'_>) -> Result<Option<Charge>, ApiError> {
        Ok(None)
    }

    /// The charge `charge_id`, if the provider made it for attempt `payment_id`.
    async fn charge_for(
        &self,
        payment_id: Uuid,
        charge_id: &str,
    ) -> Result<Option<Charge>, ApiError>;

    /// Whether the provider knows the charge `charge_id`.
    async fn charge_exists(&self, charge_id: &str) -> Result<bool, ApiError>;

    /// One page of the ledger of succeeded charges: from `since`, or after `cursor`.
    async fn ledger_page(
        &self,
        since: Option<DateTime<Utc>>,
        cursor: Option<&str>,
    ) -> Result<LedgerPage, ApiError>;

    /// Refunds a charge in full under a key derived from it; returns the refund's id.
    async fn refund(&self, charge_id: &str) -> Result<String, ApiError>;

    /// Verifies and reads a callback sent to [`Self::webhook_path`].
    fn read_event(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<ReceivedEvent, WebhookRefusal>;
}

/// The provider the shop pays through, shared.
#[derive(Clone)]
pub struct Provider(pub Arc<dyn PaymentProvider>);

impl std::ops::Deref for Provider {
    type Target = dyn PaymentProvider;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl Provider {
    /// The provider `config` names (`PAYMENT_PROVIDER`).
    pub fn from_config(config: &Config) -> Self {
        match &config.payment_provider {
            crate::config::ProviderChoice::Sandbox => Self(Arc::new(sandbox::Sandbox::new(
                &config.provider_url,
                &config.provider_api_key,
                config.provider_timeout,
                config.webhook_secrets.clone(),
            ))),
            crate::config::ProviderChoice::Stripe(stripe) => Self(Arc::new(stripe::Stripe::new(
                stripe,
                config.provider_timeout,
            ))),
        }
    }
}
