//! What both adapters do alike over HTTP: read an answer, name a failure in words an operator
//! can act on, and wait between retries.

use std::time::Duration;

use serde::de::DeserializeOwned;

use uuid::Uuid;

use super::{CallGate, Charge};
use crate::error::ApiError;

/// Calls of one charge, counting the first.
pub const ATTEMPTS: u32 = 4;
const BASE_DELAY_MS: f64 = 200.0;
const MAX_DELAY_MS: f64 = 3_000.0;

/// Why a call that may charge did not answer.
pub enum Failure {
    /// Worth another try with the same key: network errors, lost answers, 409, 429, 5xx.
    Transient(String),
    /// The provider refused the request itself (a bug on our side): do not retry.
    Rejected(String),
    /// The attempt was closed meanwhile: nothing may be charged.
    Stopped,
}

impl Failure {
    /// The failure an error status means.
    pub fn of_status(status: reqwest::StatusCode, text: String) -> Self {
        match status.as_u16() {
            409 | 429 | 500..=599 => Self::Transient(format!("{status}: {text}")),
            _ => Self::Rejected(format!("{status}: {text}")),
        }
    }

    /// A call that got no answer.
    pub fn lost(e: reqwest::Error) -> Self {
        Self::Transient(e.without_url().to_string())
    }
}

/// The answer to a request that was refused by the provider (a bug on our side): nothing
/// was charged.
pub fn not_accepted() -> ApiError {
    ApiError::unprocessable(
        "payment-not-accepted",
        "the payment provider did not accept this payment; nothing was charged",
    )
}

/// A lookup's JSON answer; any failure to get it (no answer, an error status, a body cut
/// off) is the provider being unavailable.
pub async fn get_json<T: DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, ApiError> {
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
pub fn lookup_failed(e: reqwest::Error) -> ApiError {
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

/// The HTTP client of an adapter: every call bounded by `timeout`.
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("HTTP client")
}

/// Like [`client`], every request carrying `Authorization: Bearer <key>` (marked
/// sensitive, so it is never shown in a log of the request).
pub fn client_with_key(timeout: Duration, key: &str) -> reqwest::Client {
    // A key a header cannot carry is refused at start (`Config::validate`); were one to come
    // here anyway, the provider answers 401 and the calls fail loudly.
    let mut bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
        .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static("Bearer -"));
    bearer.set_sensitive(true);
    let headers = reqwest::header::HeaderMap::from_iter([(reqwest::header::AUTHORIZATION, bearer)]);
    reqwest::Client::builder()
        .timeout(timeout)
        .default_headers(headers)
        .build()
        .expect("HTTP client")
}

/// The wait before try `try_no` (from 1): exponential backoff with full jitter.
pub fn full_jitter(try_no: u32) -> Duration {
    let bound = (BASE_DELAY_MS * 2f64.powi(try_no as i32)).min(MAX_DELAY_MS);
    Duration::from_millis((rand::random::<f64>() * bound) as u64)
}

/// One try at charging an attempt, which [`charge_with_retries`] repeats.
#[async_trait::async_trait]
pub trait ChargeTry: Send {
    /// Calls the provider once (or a few times, for one step), under the attempt's keys.
    async fn try_once(&mut self, gate: &mut dyn CallGate) -> Result<Charge, Failure>;
}

/// Charges through `tries`, retrying transient failures with exponential backoff and full
/// jitter. `gate.may_call` runs before every try and may stop it: it stamps the attempt (the
/// first try of a new attempt was stamped when the attempt was recorded), so that nobody
/// closes it as never charged while a call is under way (`payments::settle`).
pub async fn charge_with_retries(
    payment_id: Uuid,
    gate: &mut dyn CallGate,
    tries: &mut dyn ChargeTry,
) -> Result<Option<Charge>, ApiError> {
    let mut last = String::new();
    for try_no in 0..ATTEMPTS {
        if try_no > 0 {
            tokio::time::sleep(full_jitter(try_no)).await;
        }
        if !gate.may_call().await? {
            return Ok(None);
        }
        match tries.try_once(gate).await {
            Ok(charge) => return Ok(Some(charge)),
            Err(Failure::Stopped) => return Ok(None),
            Err(Failure::Rejected(why)) => {
                // A 4xx: the provider charged nothing, and would refuse a retry alike.
                tracing::error!(payment = %payment_id, %why, "the provider rejected our charge request");
                return Err(not_accepted());
            }
            Err(Failure::Transient(why)) => {
                tracing::warn!(payment = %payment_id, try_no, %why, "provider call failed; retrying with the same key");
                last = why;
            }
        }
    }
    Err(ApiError::Unavailable(anyhow::anyhow!(
        "payment provider unavailable: {last}"
    )))
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
