//! The client of the payment provider. The provider's Idempotency-Key is derived from the
//! payment attempt id, so every retry — ours here, or a retry of the whole request after a
//! crash — names the same charge, and the provider replays it instead of charging again.

use std::time::Duration;

use serde::{de::DeserializeOwned, Deserialize};
use uuid::Uuid;

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
    /// Our reference: the payment attempt id.
    #[serde(default)]
    pub reference: String,
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What one charge asks for: the payment attempt it is for (its id keys the call), the
/// amount, and the card.
pub struct ChargeOrder<'a> {
    pub payment_id: Uuid,
    pub amount_cents: i64,
    pub currency: &'a str,
    pub card_number: &'a str,
}

/// One page of the provider's ledger (`GET /v1/transactions`).
#[derive(Debug, Deserialize)]
pub struct LedgerPage {
    pub data: Vec<Charge>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// The provider's Idempotency-Key for refunding one of its charges: one refund per charge,
/// however often and by whomever it is asked for.
pub fn refund_key(charge_id: &str) -> String {
    format!("once-refund-{charge_id}")
}

/// A lookup's JSON answer; any failure to get it (no answer, an error status, a body cut
/// off) is the provider being unavailable.
async fn get_json<T: DeserializeOwned>(request: reqwest::RequestBuilder) -> Result<T, ApiError> {
    request
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(lookup_failed)?
        .json()
        .await
        .map_err(lookup_failed)
}

/// Says what failed in words an operator can act on (the reconciler's runs show them).
fn lookup_failed(e: reqwest::Error) -> ApiError {
    let url = e.url().map(shown_url).unwrap_or_default();
    let what = if e.is_connect() || e.is_timeout() {
        format!("payment provider unreachable at {url}")
    } else if let Some(status) = e.status() {
        format!("payment provider refused {url}: {status}")
    } else {
        format!("payment provider call failed: {}", e.without_url())
    };
    ApiError::Unavailable(anyhow::anyhow!(what))
}

/// Where a call went, as the console may show it: never a password in the address, nor
/// its query.
fn shown_url(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.to_string()
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
        let url = format!("{}/v1/charges?reference={payment_id}", self.base_url);
        get_json(self.http.get(url)).await
    }

    /// One page of the ledger: from `since` (a time), or after `cursor` (from the last page).
    pub async fn ledger_page(
        &self,
        since: Option<chrono::DateTime<chrono::Utc>>,
        cursor: Option<&str>,
    ) -> Result<LedgerPage, ApiError> {
        let mut query: Vec<(&str, String)> = vec![("limit", "100".into())];
        match (cursor, since) {
            (Some(cursor), _) => query.push(("starting_after", cursor.to_owned())),
            (None, Some(since)) => query.push(("since", since.to_rfc3339())),
            (None, None) => {}
        }
        let url = format!("{}/v1/transactions", self.base_url);
        get_json(self.http.get(url).query(&query)).await
    }

    /// Whether the provider knows the charge `charge_id`.
    pub async fn charge_exists(&self, charge_id: &str) -> Result<bool, ApiError> {
        let response = self
            .http
            .get(format!("{}/v1/charges/{charge_id}", self.base_url))
            .send()
            .await
            .map_err(lookup_failed)?;
        match response.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            other => Err(ApiError::Unavailable(anyhow::anyhow!(
                "payment provider answered {other} for charge {charge_id}"
            ))),
        }
    }

    /// Refunds a charge in full, under a key derived from the charge: asking again replays
    /// the same refund. Returns the provider's refund id.
    pub async fn refund(&self, charge_id: &str) -> Result<String, ApiError> {
        #[derive(Deserialize)]
        struct Refund {
            id: String,
        }
        let refund: Refund = self
            .http
            .post(format!("{}/v1/refunds", self.base_url))
            .header("idempotency-key", refund_key(charge_id))
            .json(&serde_json::json!({ "charge_id": charge_id }))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(lookup_failed)?
            .json()
            .await
            .map_err(lookup_failed)?;
        Ok(refund.id)
    }

    /// Charges the attempt, retrying transient failures with exponential backoff and full
    /// jitter. `may_call` runs before every call and may stop it: it stamps the attempt (the
    /// first call of a new attempt was stamped when the attempt was recorded), so that
    /// nobody closes it as never charged while a call is under way (see `settle`).
    /// `Ok(None)`: the attempt was closed meanwhile, and was not charged by us.
    pub async fn charge<F, Fut>(
        &self,
        order: &ChargeOrder<'_>,
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
            match self.try_charge(order).await {
                Ok(charge) => return Ok(Some(charge)),
                Err(Failure::Rejected(why)) => {
                    // A 4xx: the provider charged nothing, and would refuse a retry alike.
                    tracing::error!(payment = %order.payment_id, %why, "the provider rejected our charge request");
                    return Err(ApiError::unprocessable(
                        "payment-not-accepted",
                        "the payment provider did not accept this payment; nothing was charged",
                    ));
                }
                Err(Failure::Transient(why)) => {
                    tracing::warn!(payment = %order.payment_id, try_no, %why, "provider call failed; retrying with the same key");
                    last = why;
                }
            }
        }
        Err(ApiError::Unavailable(anyhow::anyhow!(
            "payment provider unavailable: {last}"
        )))
    }

    async fn try_charge(&self, order: &ChargeOrder<'_>) -> Result<Charge, Failure> {
        let response = self
            .http
            .post(format!("{}/v1/charges", self.base_url))
            .header("idempotency-key", provider_key(order.payment_id))
            .json(&serde_json::json!({
                "amount_cents": order.amount_cents,
                "currency": order.currency,
                "card_number": order.card_number,
                "reference": order.payment_id.to_string(),
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

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_shown_address_keeps_no_credentials_and_no_query() {
        let url = reqwest::Url::parse("http://shop:s3cret@provider:8081/v1/transactions?limit=100")
            .unwrap();
        assert_eq!(shown_url(&url), "http://provider:8081/v1/transactions");
    }
}
