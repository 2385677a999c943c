//! `use_submit_once`: the browser's half of the idempotency protocol (docs/design.md).
//!
//! One *intent* (say, "place this order") owns one Idempotency-Key from the moment the page
//! is rendered until the intent ends:
//!
//! * the key starts as the one the server rendered into the form (so a submit before
//!   hydration, which posts the plain form, carries the same kind of key), and is kept in
//!   `sessionStorage` with the request body, so a reload during a submit resumes the same
//!   intent instead of starting a second one;
//! * while a submit is in flight the hook is `busy` (the button is disabled);
//! * network errors, 429, 502, 503 and 504 are retried with the same key, with exponential
//!   backoff and full jitter, a bounded number of times;
//! * 409 means "the first attempt is still running": wait `Retry-After`, poll the key's
//!   status, and ask again (the answer becomes a replay once the first attempt completes);
//! * only success or a definitive refusal ends the intent; the next intent gets a new key.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The state a page binds to: the current key, whether a submit is in flight, and a
/// message for the shopper (progress or the reason of a refusal).
#[derive(Clone, Copy)]
pub struct SubmitOnce {
    pub key: RwSignal<String>,
    pub busy: RwSignal<bool>,
    pub message: RwSignal<Option<String>>,
    slot: StoredValue<String>,
    on_success: StoredValue<Box<dyn Fn(serde_json::Value) + Send + Sync>>,
    on_refused: StoredValue<Option<RefusalHandler>>,
}

/// What a page does with a definitive refusal instead of starting a new intent itself.
type RefusalHandler = Box<dyn Fn(String) + Send + Sync>;

/// What is kept in `sessionStorage` under the slot's name. `url` and `body` are set while
/// a submit is in flight, so that a reload can resume it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Intent {
    key: String,
    url: Option<String>,
    body: Option<String>,
}

impl Intent {
    /// An intent with a key and nothing in flight.
    fn idle(key: String) -> Self {
        Self {
            key,
            url: None,
            body: None,
        }
    }
}

/// Creates the hook for one kind of intent (`slot`), starting from the key the server
/// rendered. `on_success` gets the JSON body of the successful answer.
pub fn use_submit_once(
    slot: impl Into<String>,
    server_key: String,
    on_success: impl Fn(serde_json::Value) + Send + Sync + 'static,
) -> SubmitOnce {
    let hook = SubmitOnce {
        key: RwSignal::new(server_key),
        busy: RwSignal::new(false),
        message: RwSignal::new(None),
        slot: StoredValue::new(slot.into()),
        on_success: StoredValue::new(Box::new(on_success)),
        on_refused: StoredValue::new(None),
    };
    // Runs in the browser only, once hydrated: adopt an unfinished intent, or remember ours.
    Effect::new(move |_| hook.adopt_stored_intent());
    hook
}

impl SubmitOnce {
    /// Hands a definitive refusal to the page instead of starting a new intent here: where
    /// the server owns the intent's key (the checkout: the cart's key), the page must show
    /// the server's state again — the cart as it is now, with its new key — rather than go
    /// on under a key made up in this tab.
    pub fn with_on_refused(self, on_refused: impl Fn(String) + Send + Sync + 'static) -> Self {
        self.on_refused.set_value(Some(Box::new(on_refused)));
        self
    }

    /// Sends `body` to `url` under the intent's key; ignored while a submit is in flight.
    pub fn submit(self, url: &str, body: String) {
        if self.busy.get_untracked() {
            return;
        }
        let intent = Intent {
            key: self.key.get_untracked(),
            url: Some(url.to_owned()),
            body: Some(body),
        };
        self.remember(&intent);
        self.send(intent);
    }

    /// Resumes an intent that was in flight when the page went away (a reload mid-submit).
    /// An idle stored key is never adopted: the key the server rendered stands, so every tab
    /// and every render of the same intent submits under the same key.
    fn adopt_stored_intent(self) {
        match browser::load(&self.slot.get_value()) {
            Some(stored) if stored.url.is_some() && stored.body.is_some() => {
                self.key.set(stored.key.clone());
                self.message
                    .set(Some("Resuming where you left off…".into()));
                self.send(stored);
            }
            _ => self.remember(&Intent::idle(self.key.get_untracked())),
        }
    }

    fn send(self, intent: Intent) {
        self.busy.set(true);
        leptos::task::spawn_local(async move {
            let outcome = browser::deliver(&intent, self.message).await;
            self.finish(outcome);
        });
    }

    fn finish(self, outcome: Outcome) {
        self.busy.set(false);
        // Whatever happened, nothing is in flight any more: a reload must not resend it.
        self.remember(&Intent::idle(self.key.get_untracked()));
        match outcome {
            Outcome::Done(body) => {
                self.start_new_intent();
                self.message.set(None);
                self.on_success.with_value(|f| f(body));
            }
            Outcome::Refused(detail) => {
                if self.on_refused.with_value(Option::is_some) {
                    self.on_refused
                        .with_value(|f| f.as_ref().map(|f| f(detail.clone())));
                } else {
                    self.start_new_intent();
                }
                self.message.set(Some(detail));
            }
            Outcome::GaveUp(detail) => {
                // Not definitive: keep the key, so the next click is the same intent.
                self.message.set(Some(detail));
            }
        }
    }

    fn remember(self, intent: &Intent) {
        browser::save(&self.slot.get_value(), intent);
    }

    fn start_new_intent(self) {
        self.use_key(browser::new_key());
    }

    fn use_key(self, key: String) {
        self.remember(&Intent::idle(key.clone()));
        self.key.set(key);
    }
}

/// Loads `url` afresh in the browser (a full page load, so the server renders its current
/// state); does nothing on the server.
pub fn reload_to(url: &str) {
    browser::reload_to(url)
}

/// Waits `ms` milliseconds in the browser (for polling); returns at once on the server.
pub async fn pause(ms: u32) {
    browser::pause(ms).await
}

/// How an intent's delivery ended.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Outcome {
    /// 2xx: the body of the answer (first execution or replay, the same either way).
    Done(serde_json::Value),
    /// A definitive refusal (4xx other than 409 and 429): shown, and the intent ends.
    Refused(String),
    /// Retries exhausted or a server error: shown; the intent and its key are kept.
    GaveUp(String),
}

#[cfg(feature = "hydrate")]
mod browser {
    use gloo_net::http::{Request, Response};
    use gloo_timers::future::TimeoutFuture;
    use leptos::prelude::*;

    use super::{Intent, Outcome};

    const MAX_RETRIES: u32 = 8;
    const BASE_DELAY_MS: f64 = 400.0;
    const MAX_DELAY_MS: f64 = 5_000.0;
    /// How long we keep polling a request the server says is still in progress.
    const IN_PROGRESS_LIMIT_MS: f64 = 120_000.0;

    pub async fn pause(ms: u32) {
        TimeoutFuture::new(ms).await
    }

    pub fn reload_to(url: &str) {
        if let Some(window) = web_sys::window() {
            let _ = window.location().set_href(url);
        }
    }

    pub fn new_key() -> String {
        web_sys::window()
            .and_then(|w| w.crypto().ok())
            .map(|c| c.random_uuid())
            .unwrap_or_else(|| {
                format!(
                    "{:x}{:x}",
                    js_sys::Date::now() as u64,
                    (js_sys::Math::random() * 1e16) as u64
                )
            })
    }

    fn storage() -> Option<web_sys::Storage> {
        web_sys::window()?.session_storage().ok()?
    }

    pub fn load(slot: &str) -> Option<Intent> {
        let text = storage()?.get_item(&format!("once:intent:{slot}")).ok()??;
        serde_json::from_str(&text).ok()
    }

    pub fn save(slot: &str, intent: &Intent) {
        if let (Some(storage), Ok(text)) = (storage(), serde_json::to_string(intent)) {
            let _ = storage.set_item(&format!("once:intent:{slot}"), &text);
        }
    }

    /// Full jitter: a uniformly random wait between 0 and the exponential bound.
    fn backoff_ms(attempt: u32) -> u32 {
        let bound = (BASE_DELAY_MS * 2f64.powi(attempt as i32)).min(MAX_DELAY_MS);
        (js_sys::Math::random() * bound) as u32
    }

    async fn post(intent: &Intent) -> Result<Response, gloo_net::Error> {
        let url = intent.url.as_deref().unwrap_or_default();
        Request::post(url)
            .header("Idempotency-Key", &intent.key)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(intent.body.clone().unwrap_or_default())?
            .send()
            .await
    }

    async fn problem_detail(response: Response) -> String {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        body["detail"]
            .as_str()
            .unwrap_or("The shop refused the request.")
            .to_owned()
    }

    pub async fn deliver(intent: &Intent, message: RwSignal<Option<String>>) -> Outcome {
        let mut retries = 0;
        let started = js_sys::Date::now();
        loop {
            let response = post(intent).await;
            let status = response.as_ref().map(|r| r.status()).unwrap_or(0);
            match status {
                200..=299 => {
                    let body = response.unwrap().json().await.unwrap_or_default();
                    return Outcome::Done(body);
                }
                409 if js_sys::Date::now() - started < IN_PROGRESS_LIMIT_MS => {
                    let wait_s = response
                        .ok()
                        .and_then(|r| r.headers().get("retry-after"))
                        .and_then(|v| v.parse::<u32>().ok())
                        .unwrap_or(1);
                    message.set(Some("Still being processed…".into()));
                    TimeoutFuture::new(wait_s * 1000).await;
                    poll_status(&intent.key, message).await;
                }
                0 | 429 | 502 | 503 | 504 if retries < MAX_RETRIES => {
                    retries += 1;
                    message.set(Some("Connection problem — retrying safely…".into()));
                    TimeoutFuture::new(backoff_ms(retries)).await;
                }
                0 | 409 | 429 | 502 | 503 | 504 => {
                    return Outcome::GaveUp(
                        "We could not reach the shop. Nothing was charged twice; please try again."
                            .into(),
                    )
                }
                500..=599 => return Outcome::GaveUp(problem_detail(response.unwrap()).await),
                _ => return Outcome::Refused(problem_detail(response.unwrap()).await),
            }
        }
    }

    /// Asks the server how the first attempt is doing; shown to the shopper while waiting.
    async fn poll_status(key: &str, message: RwSignal<Option<String>>) {
        let url = format!(
            "/api/idempotency-keys/{}",
            js_sys::encode_uri_component(key)
        );
        if let Ok(response) = Request::get(&url).send().await {
            let status: serde_json::Value = response.json().await.unwrap_or_default();
            if status["state"] == "completed" {
                message.set(Some("Almost done…".into()));
            }
        }
    }
}

/// On the server the hook only renders; nothing is ever sent from there.
#[cfg(not(feature = "hydrate"))]
mod browser {
    use leptos::prelude::*;

    use super::{Intent, Outcome};

    pub fn new_key() -> String {
        String::new()
    }
    pub fn reload_to(_: &str) {}
    pub async fn pause(_: u32) {}
    pub fn load(_: &str) -> Option<Intent> {
        None
    }
    pub fn save(_: &str, _: &Intent) {}
    pub async fn deliver(_: &Intent, _: RwSignal<Option<String>>) -> Outcome {
        Outcome::GaveUp(String::new())
    }
}
