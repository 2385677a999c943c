//! The sandbox provider of this repository (`provider/`), over HTTP. Its Idempotency-Key is
//! derived from the payment attempt id, so every retry — ours here, or a retry of the whole
//! request after a crash — names the same charge, and the provider replays it instead of
//! charging again. It charges in one call, so an attempt records no intent.

use std::time::Duration;

use async_trait::async_trait;
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::{
    http::{self, charge_with_retries, get_json, lookup_failed, ChargeTry, Failure},
    signature, AttemptRef, CallGate, Charge, ChargeOrder, EventAbout, Instrument, InstrumentKind,
    LedgerPage, PaymentProvider, ReceivedEvent, WebhookRefusal,
};
use crate::error::ApiError;

/// Whether a 404 is the sandbox's own `{"error": {"code": "not_found"}}`.
async fn provider_not_found(response: reqwest::Response) -> bool {
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    body["error"]["code"] == "not_found"
}

/// The sandbox provider's client.
pub struct Sandbox {
    http: reqwest::Client,
    base_url: String,
    webhook_secrets: Vec<String>,
}

/// The provider's Idempotency-Key for refunding one of its charges: one refund per charge,
/// however often and by whomever it is asked for.
pub fn refund_key(charge_id: &str) -> String {
    format!("once-refund-{charge_id}")
}

/// The provider's Idempotency-Key for an attempt.
pub fn provider_key(payment_id: Uuid) -> String {
    format!("once-payment-{payment_id}")
}

/// One page of the sandbox's ledger (`GET /v1/transactions`).
#[derive(Deserialize)]
struct SandboxPage {
    data: Vec<Charge>,
    has_more: bool,
    next_cursor: Option<String>,
}

impl Sandbox {
    /// A client of the sandbox at `base_url`, calling with the merchant's `api_key` and
    /// taking callbacks signed with any of `webhook_secrets`.
    pub fn new(
        base_url: &str,
        api_key: &str,
        timeout: Duration,
        webhook_secrets: Vec<String>,
    ) -> Self {
        Self {
            http: http::client_with_key(timeout, api_key),
            base_url: base_url.trim_end_matches('/').to_owned(),
            webhook_secrets,
        }
    }

    /// Every charge the sandbox made under the attempt's reference, asked once.
    async fn charges_of(&self, payment_id: Uuid) -> Result<Vec<Charge>, ApiError> {
        let url = format!("{}/v1/charges?reference={payment_id}", self.base_url);
        get_json(self.http.get(url)).await
    }
}

#[async_trait]
impl PaymentProvider for Sandbox {
    fn instrument(&self) -> InstrumentKind {
        InstrumentKind::CardNumber
    }

    fn webhook_path(&self) -> &'static str {
        "/webhooks/provider"
    }

    async fn charge(
        &self,
        order: &ChargeOrder<'_>,
        gate: &mut dyn CallGate,
    ) -> Result<Option<Charge>, ApiError> {
        let Instrument::CardNumber(card_number) = order.instrument else {
            return Err(http::not_accepted());
        };
        let mut tries = OneCall {
            sandbox: self,
            body: serde_json::json!({
                "amount_cents": order.amount_cents,
                "currency": order.currency,
                "card_number": card_number,
                "reference": order.payment_id.to_string(),
            }),
            key: provider_key(order.payment_id),
        };
        charge_with_retries(order.payment_id, gate, &mut tries).await
    }

    /// The sandbox charges in one call under the attempt's key: once the request is over,
    /// nothing is left to stop.
    async fn final_charges(&self, attempt: &AttemptRef<'_>) -> Result<Vec<Charge>, ApiError> {
        self.charges_of(attempt.payment_id).await
    }

    async fn charge_for(
        &self,
        payment_id: Uuid,
        charge_id: &str,
    ) -> Result<Option<Charge>, ApiError> {
        let listed = self.charges_of(payment_id).await?;
        Ok(listed.into_iter().find(|c| c.id == charge_id))
    }

    async fn charge_exists(&self, charge_id: &str) -> Result<bool, ApiError> {
        let response = self
            .http
            .get(format!("{}/v1/charges/{charge_id}", self.base_url))
            .send()
            .await
            .map_err(lookup_failed)?;
        match response.status().as_u16() {
            200 => Ok(true),
            // The provider's own "no such charge", not any 404 on the way (a proxy's, a wrong
            // PROVIDER_URL): "unknown to the provider" holds an order.
            404 if provider_not_found(response).await => Ok(false),
            other => Err(ApiError::Unavailable(anyhow::anyhow!(
                "payment provider answered {other} for charge {charge_id}"
            ))),
        }
    }

    async fn ledger_page(
        &self,
        since: Option<DateTime<Utc>>,
        cursor: Option<&str>,
    ) -> Result<LedgerPage, ApiError> {
        let mut query: Vec<(&str, String)> = vec![("limit", "100".into())];
        match (cursor, since) {
            (Some(cursor), _) => query.push(("starting_after", cursor.to_owned())),
            (None, Some(since)) => query.push(("since", since.to_rfc3339())),
            (None, None) => {}
        }
        let url = format!("{}/v1/transactions", self.base_url);
        let page: SandboxPage = get_json(self.http.get(url).query(&query)).await?;
        Ok(LedgerPage {
            data: page.data,
            has_more: page.has_more,
            next_cursor: page.next_cursor,
        })
    }

    async fn refund(&self, charge_id: &str) -> Result<String, ApiError> {
        #[derive(Deserialize)]
        struct Refund {
            id: String,
        }
        let refund: Refund = get_json(
            self.http
                .post(format!("{}/v1/refunds", self.base_url))
                .header("idempotency-key", refund_key(charge_id))
                .json(&serde_json::json!({ "charge_id": charge_id })),
        )
        .await?;
        Ok(refund.id)
    }

    fn read_event(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<ReceivedEvent, WebhookRefusal> {
        let header = headers.get("once-signature").and_then(|v| v.to_str().ok());
        signature::verify(header, body, &self.webhook_secrets, now)?;
        read_envelope(body)
    }
}

/// The envelope every sandbox event shares. `data` is read only for the kinds we know.
#[derive(Deserialize)]
struct SandboxEvent {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    tx_no: String,
    #[serde(default)]
    data: serde_json::Value,
}

/// The data of `charge.succeeded` and `charge.failed`.
#[derive(Deserialize)]
struct ChargeData {
    charge_id: String,
    amount_cents: i64,
    currency: String,
    reference: String,
    failure_code: Option<String>,
}

fn read_envelope(body: &[u8]) -> Result<ReceivedEvent, WebhookRefusal> {
    let invalid = |e: serde_json::Error| WebhookRefusal::Invalid(e.to_string());
    let payload: serde_json::Value = serde_json::from_slice(body).map_err(invalid)?;
    let event: SandboxEvent = serde_json::from_value(payload.clone()).map_err(invalid)?;
    let data = serde_json::from_value::<ChargeData>(event.data).map(|d| Charge {
        id: d.charge_id,
        status: String::new(),
        amount_cents: d.amount_cents,
        currency: d.currency,
        failure_code: d.failure_code,
        reference: d.reference,
        created_at: None,
        authentication: None,
    });
    let about = match (event.event_type.as_str(), data) {
        ("charge.succeeded", Ok(charge)) => EventAbout::Succeeded(charge),
        ("charge.failed", Ok(charge)) => EventAbout::Failed(charge),
        ("charge.succeeded" | "charge.failed", Err(_)) => EventAbout::Malformed,
        _ => EventAbout::Other,
    };
    Ok(ReceivedEvent {
        delivery_id: event.tx_no,
        event_id: event.id,
        event_type: event.event_type,
        about,
        payload,
    })
}

/// The sandbox charges in one call: `POST /v1/charges` under the attempt's key.
struct OneCall<'a> {
    sandbox: &'a Sandbox,
    body: serde_json::Value,
    key: String,
}

#[async_trait]
impl ChargeTry for OneCall<'_> {
    async fn try_once(&mut self, _gate: &mut dyn CallGate) -> Result<Charge, Failure> {
        let response = self
            .sandbox
            .http
            .post(format!("{}/v1/charges", self.sandbox.base_url))
            .header("idempotency-key", &self.key)
            .json(&self.body)
            .send()
            .await
            .map_err(Failure::lost)?;
        let status = response.status();
        if status.is_success() {
            // A body cut off mid-way is a lost answer: transient.
            return response.json::<Charge>().await.map_err(Failure::lost);
        }
        let text = response.text().await.unwrap_or_default();
        Err(Failure::of_status(status, text))
    }
}
