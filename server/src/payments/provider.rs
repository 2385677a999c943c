//! The client of the payment provider. The provider's Idempotency-Key is derived from the
//! payment attempt id, so every retry — ours here, or a retry of the whole request after a
//! crash — names the same charge, and the provider replays it instead of charging again.

use std::time::Duration;

use serde::Deserialize;
use uuid::Uuid;

use super::{apply::ChargeFacts, store::Attempt, CardNumber};
use crate::error::ApiError;

const ATTEMPTS: u32 = 4;
const BASE_DELAY_MS: f64 = 200.0;
const MAX_DELAY_MS: f64 = 3_000.0;

#[derive(Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
    base_url: String,
}

/// The provider's answer, as much of it as we use.
#[derive(Debug, Deserialize)]
pub struct Charge {
    pub id: String,
    pub status: String,
    pub amount_cents: i64,
    pub currency: String,
    pub failure_code: Option<String>,
}

impl Charge {
    pub fn facts(&self) -> ChargeFacts {
        ChargeFacts {
            charge_id: self.id.clone(),
            amount_cents: self.amount_cents,
            currency: self.currency.clone(),
        }
    }
}

/// The provider's Idempotency-Key for an attempt.
pub fn provider_key(payment_id: Uuid) -> String {
    format!("once-payment-{payment_id}")
}

enum Failure {
    /// Worth another try with the same key: network errors, lost responses, 409, 429, 5xx.
    Transient(String),
    /// The provider refused the request itself (a bug on our side): do not retry.
    Rejected(String),
}

impl ProviderClient {
    pub fn new(base_url: &str, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .expect("HTTP client");
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        }
    }

    /// Every charge the provider made for one of our attempts (its `reference`), asked once.
    /// This is how an attempt whose outcome is unknown is settled: by asking, never guessing.
    pub async fn charges_for(&self, payment_id: Uuid) -> Result<Vec<Charge>, ApiError> {
        let unavailable = |e: reqwest::Error| {
            ApiError::Unavailable(anyhow::anyhow!("payment provider lookup failed: {e}"))
        };
        self.http
            .get(format!(
                "{}/v1/charges?reference={payment_id}",
                self.base_url
            ))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(unavailable)?
            .json()
            .await
            .map_err(unavailable)
    }

    /// Charges the attempt, retrying transient failures with exponential backoff and full
    /// jitter. `may_call` runs before every call and may stop it: it stamps the attempt, so
    /// that nobody closes it as never charged while a call is under way (see `settle`).
    /// `Ok(None)`: the attempt was closed meanwhile, and was not charged by us.
    pub async fn charge<F, Fut>(
        &self,
        attempt: &Attempt,
        card: &CardNumber,
        mut may_call: F,
    ) -> Result<Option<Charge>, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool, ApiError>>,
    {
        let mut last = String::new();
        for try_no in 0..ATTEMPTS {
            if try_no > 0 {
                tokio::time::sleep(full_jitter(try_no)).await;
            }
            if !may_call().await? {
                return Ok(None);
            }
            match self.try_charge(attempt, card).await {
                Ok(charge) => return Ok(Some(charge)),
                Err(Failure::Rejected(why)) => {
                    // A 4xx: the provider charged nothing, and would refuse a retry alike.
                    tracing::error!(payment = %attempt.id, %why, "the provider rejected our charge request");
                    return Err(ApiError::unprocessable(
                        "payment-not-accepted",
                        "the payment provider did not accept this payment; nothing was charged",
                    ));
                }
                Err(Failure::Transient(why)) => {
                    tracing::warn!(payment = %attempt.id, try_no, %why, "provider call failed; retrying with the same key");
                    last = why;
                }
            }
        }
        Err(ApiError::Unavailable(anyhow::anyhow!(
            "payment provider unavailable: {last}"
        )))
    }

    async fn try_charge(&self, attempt: &Attempt, card: &CardNumber) -> Result<Charge, Failure> {
        let response = self
            .http
            .post(format!("{}/v1/charges", self.base_url))
            .header("idempotency-key", provider_key(attempt.id))
            .json(&serde_json::json!({
                "amount_cents": attempt.amount_cents,
                "currency": attempt.currency,
                "card_number": card.as_str(),
                "reference": attempt.id.to_string(),
            }))
            .send()
            .await
            .map_err(|e| Failure::Transient(e.to_string()))?;
        let status = response.status();
        if status.is_success() {
            // A body cut off mid-way is a lost response: transient.
            return response
                .json::<Charge>()
                .await
                .map_err(|e| Failure::Transient(e.to_string()));
        }
        let text = response.text().await.unwrap_or_default();
        match status.as_u16() {
            409 | 429 | 500..=599 => Err(Failure::Transient(format!("{status}: {text}"))),
            _ => Err(Failure::Rejected(format!("{status}: {text}"))),
        }
    }
}

fn full_jitter(try_no: u32) -> Duration {
    let bound = (BASE_DELAY_MS * 2f64.powi(try_no as i32)).min(MAX_DELAY_MS);
    Duration::from_millis((rand::random::<f64>() * bound) as u64)
}
