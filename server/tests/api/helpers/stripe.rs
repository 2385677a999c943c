//! Helpers for the Stripe tests: a real localstripe process (a stateful fake of Stripe's API
//! that this project did not write, `scripts/setup` installs it) on a free port, one per
//! test, and a shop paying through it.

use std::{net::TcpListener, process::Stdio, time::Duration};

use serde_json::Value;

use super::{spawn_app_with_faults, TestApp};
use server::config::{ProviderChoice, StripeSettings};

/// The secret the tests' Stripe webhooks are signed with.
pub const STRIPE_WEBHOOK_SECRET: &str = "whsec_stripe_integration_tests";
/// localstripe takes any key of the right kind.
const SECRET_KEY: &str = "sk_test_once";
const PUBLISHABLE_KEY: &str = "pk_test_once";
/// localstripe's test payment methods.
pub const PM_VISA: &str = "pm_card_visa";
pub const PM_DECLINED: &str = "pm_card_chargeCustomerFail";

/// Where `scripts/setup` installs localstripe (`LOCALSTRIPE` names another).
fn program() -> String {
    std::env::var("LOCALSTRIPE").unwrap_or_else(|_| "/opt/localstripe/bin/localstripe".into())
}

/// A localstripe process, killed when dropped.
pub struct TestStripe {
    pub base: String,
    http: reqwest::Client,
    _process: tokio::process::Child,
}

/// A free port on the loopback (taken back by the process a moment later).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Starts localstripe and waits until it answers.
pub async fn spawn_stripe() -> TestStripe {
    let port = free_port();
    let process = tokio::process::Command::new(program())
        .args(["--port", &port.to_string(), "--from-scratch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("localstripe runs (scripts/setup installs it)");
    let stripe = TestStripe {
        base: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::new(),
        _process: process,
    };
    for _ in 0..300 {
        if stripe.try_get("/v1/events").await.is_some() {
            return stripe;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("localstripe did not answer on port {port}");
}

/// A shop (with fault injection) paying through a fresh localstripe, whose webhooks go to
/// the shop's Stripe route.
pub async fn spawn_shop_and_stripe() -> (TestApp, TestStripe) {
    let stripe = spawn_stripe().await;
    let settings = settings(&stripe);
    let app =
        spawn_app_with_faults(move |c| c.payment_provider = ProviderChoice::Stripe(settings)).await;
    stripe.send_webhooks_to(&app.url("/webhooks/stripe")).await;
    (app, stripe)
}

/// The shop's Stripe settings for `stripe`.
pub fn settings(stripe: &TestStripe) -> StripeSettings {
    StripeSettings {
        api_base: stripe.base.clone(),
        secret_key: SECRET_KEY.into(),
        publishable_key: PUBLISHABLE_KEY.into(),
        js_url: format!("{}/js.stripe.com/v3/", stripe.base),
        webhook_secrets: vec![STRIPE_WEBHOOK_SECRET.into()],
    }
}

impl TestStripe {
    async fn try_get(&self, path: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    pub async fn get(&self, path: &str) -> Value {
        self.try_get(path).await.expect("localstripe answers")
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Value {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .form(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            // `/_config` answers with no body.
            .unwrap_or(Value::Null)
    }

    /// Registers (or replaces) the one webhook endpoint, for the events the shop acts on.
    pub async fn send_webhooks_to(&self, url: &str) {
        let form = [
            ("url", url),
            ("secret", STRIPE_WEBHOOK_SECRET),
            ("events[]", "payment_intent.succeeded"),
            ("events[]", "payment_intent.payment_failed"),
        ];
        self.post("/_config/webhooks/once", &form).await;
    }

    /// Every PaymentIntent localstripe holds for the order, whatever its status.
    pub async fn intents_of_order(&self, order_id: &str) -> Vec<Value> {
        let listed = self.get("/v1/payment_intents?limit=100").await;
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|pi| pi["metadata"]["order_id"] == order_id)
            .cloned()
            .collect()
    }

    /// How many of the order's intents took the money.
    pub async fn charged(&self, order_id: &str) -> usize {
        let intents = self.intents_of_order(order_id).await;
        intents
            .iter()
            .filter(|pi| pi["status"] == "succeeded")
            .count()
    }

    /// The refunds of one intent.
    pub async fn refunds_of(&self, intent_id: &str) -> usize {
        let listed = self
            .get(&format!("/v1/refunds?payment_intent={intent_id}"))
            .await;
        listed["data"].as_array().unwrap().len()
    }

    /// The events of `kind` localstripe made, oldest first.
    pub async fn events(&self, kind: &str) -> Vec<Value> {
        let listed = self.get(&format!("/v1/events?type={kind}&limit=100")).await;
        listed["data"].as_array().unwrap().clone()
    }

    /// A PaymentIntent made and confirmed directly at localstripe, as a second create our
    /// shop never asked for would be: for `payment_id` of `order_id`, `amount_cents`.
    pub async fn stray_intent(&self, payment_id: &str, order_id: &str, amount_cents: i64) -> Value {
        let amount = amount_cents.to_string();
        let created = self
            .post(
                "/v1/payment_intents",
                &[
                    ("amount", &amount),
                    ("currency", "eur"),
                    ("payment_method", PM_VISA),
                    ("metadata[payment_id]", payment_id),
                    ("metadata[order_id]", order_id),
                ],
            )
            .await;
        let id = created["id"].as_str().unwrap();
        self.post(&format!("/v1/payment_intents/{id}/confirm"), &[])
            .await
    }

    /// A payment method for a card number (`4000002500003155` asks for authentication).
    pub async fn card(&self, number: &str) -> String {
        let method = self
            .post(
                "/v1/payment_methods",
                &[
                    ("type", "card"),
                    ("card[number]", number),
                    ("card[exp_month]", "12"),
                    ("card[exp_year]", "2034"),
                    ("card[cvc]", "123"),
                ],
            )
            .await;
        method["id"].as_str().unwrap().to_owned()
    }
}

/// `POST /api/orders/{order_id}/payments` with a payment method, as the checkout page sends
/// it after Stripe.js.
pub fn pay_with_method(
    app: &TestApp,
    order_id: &str,
    key: &str,
    method: &str,
) -> reqwest::RequestBuilder {
    app.client
        .post(app.url(&format!("/api/orders/{order_id}/payments")))
        .header("idempotency-key", key)
        .json(&serde_json::json!({ "payment_method": method }))
}

/// `body` signed as Stripe signs a webhook, with `secret` at `t`.
pub fn stripe_signature(secret: &str, t: i64, body: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Sends `event` to the shop's Stripe route, signed with `secret`.
pub async fn deliver(app: &TestApp, event: &Value, secret: &str) -> reqwest::Response {
    let body = event.to_string();
    let t = chrono::Utc::now().timestamp();
    reqwest::Client::new()
        .post(app.url("/webhooks/stripe"))
        .header("stripe-signature", stripe_signature(secret, t, &body))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}
