//! Stripe, through PaymentIntents (docs/payments.md, "Going live with Stripe"). A charge is a
//! PaymentIntent; its id is the charge id the flow records.
//!
//! An attempt is charged in two steps, each a recovery point:
//! 1. the intent is created (not confirmed: nothing is charged yet) under the Idempotency-Key
//!    `once-payment-{attempt}`, with the order and the attempt in its metadata, and its id is
//!    recorded on the attempt ([`CallGate::record_intent`]);
//! 2. the recorded intent is read, and confirmed only while it still asks for confirmation,
//!    after the attempt is stamped. The intent's own state guards the confirm (Stripe
//!    refuses to confirm one twice), so it carries no key of ours: Stripe keeps a key's
//!    first answer, a 500 too, for a day. Whatever the confirm answers, a refusal or none,
//!    the intent is read again and its status decides.
//!
//! A retry after a lost answer resumes the recorded intent: it never creates a second one,
//! even from a server that does not honour Idempotency-Key. An intent that asks for the
//! shopper's authentication (3-D Secure) is answered as pending, with its client secret: the
//! shopper's browser runs the bank's step with Stripe.js, and the shop reads the intent back
//! to learn the outcome ([`PaymentProvider::current_charge`]), as a callback is confirmed.
//! When an abandoned attempt is settled, its intent is cancelled first unless it took the money or
//! is processing ([`PaymentProvider::final_charges`]): a cancelled intent can never be
//! confirmed, so closing the attempt rests on Stripe's refusal, not on timing alone.

use std::time::Duration;

use async_trait::async_trait;
use axum::http::HeaderMap;
use chrono::{DateTime, TimeZone, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::{
    http::{self, charge_with_retries, get_json, lookup_failed, ChargeTry, Failure},
    signature, AttemptRef, CallGate, Charge, ChargeOrder, EventAbout, Instrument, InstrumentKind,
    LedgerPage, PaymentProvider, ReceivedEvent, WebhookRefusal, FAILED, SUCCEEDED,
};
use crate::{config::StripeSettings, error::ApiError};

/// An intent's status when it asks for nothing more and took nothing: not charged.
const NOT_CHARGED: &str = "not_charged";
/// An intent whose outcome is not known yet (`processing`, waiting for authentication).
const PROCESSING: &str = "processing";

/// Stripe's client.
pub struct Stripe {
    http: reqwest::Client,
    api_base: String,
    secret_key: String,
    webhook_secrets: Vec<String>,
}

/// A PaymentIntent, as much of it as the shop reads.
#[derive(Debug, Deserialize)]
struct Intent {
    id: String,
    status: String,
    amount: i64,
    currency: String,
    #[serde(default)]
    metadata: std::collections::HashMap<String, String>,
    last_payment_error: Option<PaymentError>,
    created: Option<i64>,
    /// What the shopper's browser finishes an authentication with (Stripe.js).
    client_secret: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PaymentError {
    code: Option<String>,
    decline_code: Option<String>,
}

impl Intent {
    /// Whether confirming it could still take money: nothing has, and it is not processing.
    fn could_still_charge(&self) -> bool {
        matches!(
            self.status.as_str(),
            "requires_payment_method" | "requires_confirmation" | "requires_action"
        )
    }

    /// The intent as a charge of the attempt its metadata names.
    fn charge(&self) -> Charge {
        let declined = self.last_payment_error.as_ref();
        let status = match (self.status.as_str(), declined) {
            ("succeeded", _) => SUCCEEDED,
            ("requires_payment_method" | "canceled", Some(_)) => FAILED,
            ("requires_payment_method" | "requires_confirmation" | "canceled", None) => NOT_CHARGED,
            _ => PROCESSING,
        };
        Charge {
            id: self.id.clone(),
            status: status.to_owned(),
            amount_cents: self.amount,
            currency: self.currency.to_ascii_uppercase(),
            failure_code: declined.and_then(|e| e.decline_code.clone().or_else(|| e.code.clone())),
            reference: self.metadata.get("payment_id").cloned().unwrap_or_default(),
            created_at: self.created.and_then(at),
            authentication: (self.status == "requires_action")
                .then(|| self.client_secret.clone())
                .flatten(),
        }
    }
}

fn at(seconds: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(seconds, 0).single()
}

/// Whether `id` may be put in a path: Stripe's ids are letters, digits and `_`. An id from a
/// callback or a body is never let to name another endpoint.
fn safe_id(id: &str) -> bool {
    (1..=255).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Stripe {
    pub fn new(settings: &StripeSettings, timeout: Duration) -> Self {
        Self {
            http: http::client(timeout),
            api_base: settings.api_base.trim_end_matches('/').to_owned(),
            secret_key: settings.secret_key.clone(),
            webhook_secrets: settings.webhook_secrets.clone(),
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.api_base))
            .bearer_auth(&self.secret_key)
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.api_base))
            .bearer_auth(&self.secret_key)
    }

    /// The refund Stripe holds for the intent `id`, if any.
    async fn refund_of(&self, id: &str) -> Result<Option<String>, ApiError> {
        #[derive(Deserialize)]
        struct Refunds {
            data: Vec<Listed>,
        }
        #[derive(Deserialize)]
        struct Listed {
            id: String,
        }
        let query = [("payment_intent", id), ("limit", "1")];
        let refunds: Refunds = get_json(self.get("/v1/refunds").query(&query)).await?;
        Ok(refunds.data.into_iter().next().map(|r| r.id))
    }

    /// Cancels the intent `id`, whatever the answer (a cancelled or finished intent refuses
    /// it), and reads it back: its status is what counts.
    async fn cancel(&self, id: &str) -> Result<Option<Intent>, ApiError> {
        if !safe_id(id) {
            return Ok(None);
        }
        let path = format!("/v1/payment_intents/{id}/cancel");
        let cancelled = self.post(&path).send().await;
        if let Err(e) = cancelled {
            tracing::warn!(intent = %id, error = %e.without_url(), "cancelling an intent got no answer; reading it");
        }
        self.intent(id).await
    }

    /// The intent `id`; `None` when Stripe does not know it.
    async fn intent(&self, id: &str) -> Result<Option<Intent>, ApiError> {
        if !safe_id(id) {
            return Ok(None);
        }
        let response = self
            .get(&format!("/v1/payment_intents/{id}"))
            .send()
            .await
            .map_err(lookup_failed)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = response.error_for_status().map_err(lookup_failed)?;
        Ok(Some(response.json().await.map_err(lookup_failed)?))
    }
}

#[async_trait]
impl PaymentProvider for Stripe {
    fn instrument(&self) -> InstrumentKind {
        InstrumentKind::PaymentMethod
    }

    fn webhook_path(&self) -> &'static str {
        "/webhooks/stripe"
    }

    async fn charge(
        &self,
        order: &ChargeOrder<'_>,
        gate: &mut dyn CallGate,
    ) -> Result<Option<Charge>, ApiError> {
        let Instrument::PaymentMethod(method) = order.instrument else {
            return Err(http::not_accepted());
        };
        let mut tries = TwoSteps {
            stripe: self,
            order,
            method,
            intent: order.intent_id.clone(),
        };
        charge_with_retries(order.payment_id, gate, &mut tries).await
    }

    async fn final_charges(&self, attempt: &AttemptRef<'_>) -> Result<Vec<Charge>, ApiError> {
        // No intent recorded: none was ever confirmed (confirming comes after recording).
        let Some(id) = attempt.intent_id else {
            return Ok(Vec::new());
        };
        let mut intent = self.intent(id).await?;
        if intent.as_ref().is_some_and(Intent::could_still_charge) {
            intent = self.cancel(id).await?;
        }
        let charge = intent.map(|intent| intent.charge());
        Ok(charge
            .into_iter()
            .filter(|c| c.status != NOT_CHARGED)
            .collect())
    }

    async fn current_charge(&self, attempt: &AttemptRef<'_>) -> Result<Option<Charge>, ApiError> {
        match attempt.intent_id {
            Some(id) => self.charge_for(attempt.payment_id, id).await,
            None => Ok(None),
        }
    }

    async fn charge_for(
        &self,
        payment_id: Uuid,
        charge_id: &str,
    ) -> Result<Option<Charge>, ApiError> {
        let charge = self.intent(charge_id).await?.map(|intent| intent.charge());
        Ok(charge.filter(|c| c.reference == payment_id.to_string()))
    }

    async fn charge_exists(&self, charge_id: &str) -> Result<bool, ApiError> {
        Ok(self.intent(charge_id).await?.is_some())
    }

    async fn ledger_page(
        &self,
        since: Option<DateTime<Utc>>,
        cursor: Option<&str>,
    ) -> Result<LedgerPage, ApiError> {
        #[derive(Deserialize)]
        struct Page {
            data: Vec<Event>,
            has_more: bool,
        }
        let mut query: Vec<(&str, String)> = vec![
            ("type", "payment_intent.succeeded".into()),
            ("limit", "100".into()),
        ];
        if let Some(since) = since {
            query.push(("created[gte]", since.timestamp().to_string()));
        }
        if let Some(cursor) = cursor {
            query.push(("starting_after", cursor.to_owned()));
        }
        let page: Page = get_json(self.get("/v1/events").query(&query)).await?;
        let next_cursor = page.data.last().map(|e| e.id.clone());
        let data = page
            .data
            .into_iter()
            .filter_map(|event| {
                let mut charge = serde_json::from_value::<Intent>(event.data.object)
                    .ok()?
                    .charge();
                charge.created_at = at(event.created);
                Some(charge)
            })
            .collect();
        Ok(LedgerPage {
            data,
            has_more: page.has_more,
            next_cursor,
        })
    }

    async fn refund(&self, charge_id: &str) -> Result<String, ApiError> {
        #[derive(Deserialize)]
        struct Refund {
            id: String,
        }
        if !safe_id(charge_id) {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "not a payment intent id: {charge_id:?}"
            )));
        }
        let key = format!("once-refund-{charge_id}");
        let request = self
            .post("/v1/refunds")
            .header("idempotency-key", key)
            .form(&[("payment_intent", charge_id)]);
        match get_json::<Refund>(request).await {
            Ok(refund) => Ok(refund.id),
            // Refunded already (by us past the key's day, or from Stripe's dashboard): the
            // refund that exists is the one to record.
            Err(refused) => match self.refund_of(charge_id).await? {
                Some(id) => Ok(id),
                None => Err(refused),
            },
        }
    }

    fn read_event(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<ReceivedEvent, WebhookRefusal> {
        let header = headers
            .get("stripe-signature")
            .and_then(|v| v.to_str().ok());
        signature::verify(header, body, &self.webhook_secrets, now)?;
        read_event_body(body)
    }
}

/// An event of Stripe's: its object is read only for the kinds the shop acts on.
#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    created: i64,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: serde_json::Value,
}

fn read_event_body(body: &[u8]) -> Result<ReceivedEvent, WebhookRefusal> {
    let invalid = |e: serde_json::Error| WebhookRefusal::Invalid(e.to_string());
    let payload: serde_json::Value = serde_json::from_slice(body).map_err(invalid)?;
    let event: Event = serde_json::from_value(payload.clone()).map_err(invalid)?;
    let intent = serde_json::from_value::<Intent>(event.data.object).map(|i| i.charge());
    let about = match (event.event_type.as_str(), intent) {
        ("payment_intent.succeeded", Ok(charge)) => EventAbout::Succeeded(charge),
        ("payment_intent.payment_failed", Ok(charge)) => EventAbout::Failed(charge),
        ("payment_intent.succeeded" | "payment_intent.payment_failed", Err(_)) => {
            EventAbout::Malformed
        }
        _ => EventAbout::Other,
    };
    Ok(ReceivedEvent {
        delivery_id: event.id.clone(),
        event_id: event.id,
        event_type: event.event_type,
        about,
        payload,
    })
}

/// One try of the two steps (see the module documentation).
struct TwoSteps<'a> {
    stripe: &'a Stripe,
    order: &'a ChargeOrder<'a>,
    method: &'a str,
    /// The attempt's intent, once created and recorded.
    intent: Option<String>,
}

#[async_trait]
impl ChargeTry for TwoSteps<'_> {
    async fn try_once(&mut self, gate: &mut dyn CallGate) -> Result<Charge, Failure> {
        let id = match self.intent.clone() {
            Some(id) => id,
            None => {
                let created = self.create().await?;
                let id = gate.record_intent(&created.id).await.map_err(stopped)?;
                self.intent = Some(id.clone());
                id
            }
        };
        let mut intent = self.read(&id).await?;
        if intent.status == "requires_confirmation" {
            // Confirming charges: the attempt is stamped first, like every charging call.
            if !gate.may_call().await.map_err(stopped)? {
                return Err(Failure::Stopped);
            }
            intent = self.confirm(&id).await?;
        }
        match intent.status.as_str() {
            // The bank asks the shopper: pending, with what their browser needs for it.
            "requires_action" if intent.client_secret.is_none() => Err(Failure::Transient(
                format!("intent {id} asks for authentication without a client secret"),
            )),
            // Cancelled before it charged (from Stripe's dashboard, say): the attempt is over.
            "canceled" if intent.last_payment_error.is_none() => Ok(Charge {
                status: FAILED.to_owned(),
                failure_code: Some("canceled".to_owned()),
                ..intent.charge()
            }),
            _ => Ok(intent.charge()),
        }
    }
}

/// The flow's own failure (a database error while recording): worth another try.
fn stopped(e: ApiError) -> Failure {
    Failure::Transient(e.to_string())
}

impl TwoSteps<'_> {
    async fn create(&self) -> Result<Intent, Failure> {
        let order = self.order;
        let key = format!("once-payment-{}", order.payment_id);
        let form = [
            ("amount", order.amount_cents.to_string()),
            ("currency", order.currency.to_ascii_lowercase()),
            ("payment_method", self.method.to_owned()),
            ("payment_method_types[]", "card".to_owned()),
            ("metadata[payment_id]", order.payment_id.to_string()),
            ("metadata[order_id]", order.order_id.to_string()),
        ];
        let request = self
            .stripe
            .post("/v1/payment_intents")
            .header("idempotency-key", key)
            .form(&form);
        answer(request.send().await).await
    }

    /// The recorded intent; one Stripe does not know (yet) is worth another try.
    async fn read(&self, id: &str) -> Result<Intent, Failure> {
        match self.stripe.intent(id).await {
            Ok(Some(intent)) => Ok(intent),
            Ok(None) => Err(Failure::Transient(format!(
                "Stripe does not know intent {id}"
            ))),
            Err(e) => Err(Failure::Transient(e.to_string())),
        }
    }

    /// Confirms the intent. Whatever the answer — a success, a decline (402), a refusal
    /// (a second confirm of a confirmed intent is a 400), none — the intent is read again.
    async fn confirm(&self, id: &str) -> Result<Intent, Failure> {
        let path = format!("/v1/payment_intents/{id}/confirm");
        let sent = self.stripe.post(&path).send().await;
        let answered = match sent {
            Ok(response) => format!("the confirm answered {}", response.status()),
            Err(e) => format!("the confirm got no answer: {}", e.without_url()),
        };
        let intent = self.read(id).await?;
        if intent.status == "requires_confirmation" {
            // Not confirmed: the next try asks again.
            return Err(Failure::Transient(answered));
        }
        Ok(intent)
    }
}

/// An intent from an answer: a lost or cut-off answer is transient, an error status is what
/// [`Failure::of_status`] says.
async fn answer(sent: Result<reqwest::Response, reqwest::Error>) -> Result<Intent, Failure> {
    let response = sent.map_err(Failure::lost)?;
    let status = response.status();
    if status.is_success() {
        return response.json().await.map_err(Failure::lost);
    }
    let text = response.text().await.unwrap_or_default();
    Err(Failure::of_status(status, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(status: &str, declined: bool) -> Intent {
        Intent {
            id: "pi_1".into(),
            status: status.into(),
            amount: 3600,
            currency: "eur".into(),
            metadata: [("payment_id".to_owned(), "p".to_owned())].into(),
            last_payment_error: declined.then(|| PaymentError {
                code: Some("card_declined".into()),
                decline_code: None,
            }),
            created: Some(0),
            client_secret: Some("pi_1_secret_2".into()),
        }
    }

    #[test]
    fn intents_read_as_charges_of_their_attempt() {
        let paid = intent("succeeded", false).charge();
        assert_eq!(
            (paid.status.as_str(), paid.currency.as_str()),
            (SUCCEEDED, "EUR")
        );
        assert_eq!(paid.reference, "p");
        let declined = intent("requires_payment_method", true).charge();
        assert_eq!(declined.status, FAILED);
        assert_eq!(declined.failure_code.as_deref(), Some("card_declined"));
        assert_eq!(
            intent("requires_confirmation", false).charge().status,
            NOT_CHARGED
        );
        assert_eq!(intent("processing", false).charge().status, PROCESSING);
        let asking = intent("requires_action", false).charge();
        assert_eq!(asking.status, PROCESSING);
        assert_eq!(asking.authentication.as_deref(), Some("pi_1_secret_2"));
        assert_eq!(intent("processing", false).charge().authentication, None);
    }

    #[test]
    fn only_plain_ids_are_put_in_a_path() {
        assert!(safe_id("pi_3XMAqjnBWe6TsU"));
        for bad in [
            "",
            "pi_1/../../v1/refunds",
            "pi_1?x=1",
            "pi 1",
            &"a".repeat(256),
        ] {
            assert!(!safe_id(bad), "{bad}");
        }
    }
}
