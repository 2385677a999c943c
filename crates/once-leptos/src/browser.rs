//! The hook's contact with the browser: HTTP, timers, `sessionStorage`, random keys. On the
//! server (server-side rendering) the hook only renders, so these do nothing there.

pub use imp::*;

use crate::{Options, Problem};

/// What the server knows of a key, asked before a stored intent is resumed.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(crate) enum KeyState {
    /// It has the key (running, completed or failed): sending again is a replay or a wait.
    Known,
    /// It never saw the key.
    Unknown,
    /// No answer.
    Unreachable,
}

/// How an intent's delivery ended.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(crate) enum Outcome {
    Done(serde_json::Value),
    Refused(Problem),
    /// Out of patience, a server error, or cancelled: the text to show; the key is kept.
    GaveUp(String),
}

/// What a delivery needs of its submit: the page's options, and a way to show progress and
/// to learn that the submit was cancelled. The submit's task implements it.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(crate) trait Watch {
    fn options(&self) -> &Options;
    /// The text shown while a resumed intent waits for its first answer.
    fn resuming(&self) -> Option<&'static str>;
    fn progress(&self, text: &str);
    fn cancelled(&self) -> bool;
}

#[cfg(feature = "hydrate")]
mod imp {
    use gloo_net::http::{Request, Response};
    use gloo_timers::future::TimeoutFuture;

    use super::{KeyState, Outcome, Watch};
    use crate::{
        policy::{self, Answer, Next},
        Intent, Problem,
    };

    pub async fn pause(ms: u32) {
        TimeoutFuture::new(ms).await
    }

    pub fn now_ms() -> f64 {
        js_sys::Date::now()
    }

    pub fn reload_to(url: &str) {
        if let Some(window) = web_sys::window() {
            let _ = window.location().set_href(url);
        }
    }

    /// A fresh version 4 UUID from the browser's cryptographic random numbers.
    pub fn new_key() -> String {
        let mut bytes = [0u8; 16];
        let filled = web_sys::window()
            .and_then(|w| w.crypto().ok())
            .is_some_and(|c| c.get_random_values_with_u8_array(&mut bytes).is_ok());
        if !filled {
            // No Web Crypto at all (a very old browser): still unique enough for one
            // shopper's intents, which is all a key is scoped to.
            for b in &mut bytes {
                *b = (js_sys::Math::random() * 256.0) as u8;
            }
        }
        policy::uuid_v4(bytes)
    }

    fn storage() -> Option<web_sys::Storage> {
        web_sys::window()?.session_storage().ok()?
    }

    fn item(slot: &str) -> String {
        format!("once:intent:{slot}")
    }

    pub fn load(slot: &str) -> Option<Intent> {
        let text = storage()?.get_item(&item(slot)).ok()??;
        serde_json::from_str(&text).ok()
    }

    pub fn save(slot: &str, intent: &Intent) {
        if let (Some(storage), Ok(text)) = (storage(), serde_json::to_string(intent)) {
            let _ = storage.set_item(&item(slot), &text);
        }
    }

    pub fn forget(slot: &str) {
        if let Some(storage) = storage() {
            let _ = storage.remove_item(&item(slot));
        }
    }

    /// Forgets the slot only while it still holds `key`: a task that outlived its page
    /// must not erase a newer intent stored there since.
    pub fn forget_key(slot: &str, key: &str) {
        if load(slot).is_some_and(|stored| stored.key == key) {
            forget(slot);
        }
    }

    /// Whether the server has seen `key` (`GET /api/idempotency-keys/{key}`).
    pub(crate) async fn key_state(key: &str) -> KeyState {
        match Request::get(&key_url(key)).send().await.map(|r| r.status()) {
            Ok(200) => KeyState::Known,
            Ok(404) => KeyState::Unknown,
            _ => KeyState::Unreachable,
        }
    }

    fn key_url(key: &str) -> String {
        format!(
            "/api/idempotency-keys/{}",
            js_sys::encode_uri_component(key)
        )
    }

    /// The `Prefer` header asking the server to wait `seconds` for the key's running
    /// first request (docs/protocol.md, "Waiting for the original"); `None` for 0.
    fn prefer(seconds: u32) -> Option<String> {
        (seconds > 0).then(|| format!("wait={seconds}"))
    }

    /// Sends the intent, asking to wait `wait_s` if its key's first request is running.
    async fn post(intent: &Intent, wait_s: u32) -> Result<Response, gloo_net::Error> {
        let mut request = Request::post(intent.url.as_deref().unwrap_or_default())
            .header("Idempotency-Key", &intent.key)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(prefer) = prefer(wait_s) {
            request = request.header("Prefer", &prefer);
        }
        request
            .body(intent.body.clone().unwrap_or_default())?
            .send()
            .await
    }

    /// An answer, read once: its status, `Retry-After`, whether the server waited as asked,
    /// and the JSON body.
    struct Reply {
        status: u16,
        retry_after_s: Option<u32>,
        waited: bool,
        body: serde_json::Value,
    }

    impl Reply {
        async fn read(response: Result<Response, gloo_net::Error>) -> Self {
            let Ok(response) = response else {
                return Self {
                    status: 0,
                    retry_after_s: None,
                    waited: false,
                    body: Default::default(),
                };
            };
            let retry_after_s = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.trim().parse().ok());
            Self {
                status: response.status(),
                retry_after_s,
                waited: waited(&response),
                body: response.json().await.unwrap_or_default(),
            }
        }

        fn problem_name(&self) -> Option<&str> {
            self.body["type"].as_str().map(policy::problem_name)
        }

        fn problem(&self) -> Problem {
            Problem {
                status: self.status,
                name: self.problem_name().unwrap_or_default().to_owned(),
                detail: self.body["detail"]
                    .as_str()
                    .unwrap_or("The shop could not accept this request.")
                    .to_owned(),
            }
        }
    }

    /// Sends the intent until an answer ends it or the policy gives up.
    pub(crate) async fn deliver(intent: &Intent, ui: &dyn Watch) -> Outcome {
        let (policy, messages) = (&ui.options().policy, &ui.options().messages);
        let mut retry = 0;
        let mut first_wait: Option<f64> = None;
        loop {
            if ui.cancelled() {
                return Outcome::GaveUp(messages.cancelled.into());
            }
            let reply = Reply::read(post(intent, policy.prefer_wait_s).await).await;
            let answer = Answer {
                status: reply.status,
                problem: reply.problem_name(),
                retry_after_s: reply.retry_after_s,
                waited: reply.waited,
            };
            let waited = first_wait.map_or(0, |t| (now_ms() - t) as u32);
            match policy::next(policy, &answer, retry, waited, js_sys::Math::random()) {
                Next::Done => return Outcome::Done(reply.body),
                Next::Refused => return Outcome::Refused(reply.problem()),
                Next::Retry { wait_ms } => {
                    retry += 1;
                    ui.progress(messages.retrying);
                    pause(wait_ms).await;
                }
                Next::AwaitFirst { wait_ms } => {
                    first_wait.get_or_insert_with(now_ms);
                    let slow = waited >= policy.slow_after_ms;
                    ui.progress(match (slow, ui.resuming()) {
                        (true, _) => messages.slow,
                        (false, Some(resuming)) => resuming,
                        (false, None) => messages.waiting_for_first,
                    });
                    await_first(&intent.key, wait_ms, policy.prefer_wait_s).await;
                }
                Next::GiveUp => {
                    return Outcome::GaveUp(match reply.status {
                        409 => messages.still_running.into(),
                        status if policy::is_retryable(status) => messages.unreachable.into(),
                        _ => messages.server_error.into(),
                    })
                }
            }
        }
    }

    /// Whether the server waited as the request asked (`Preference-Applied: wait=N`, N at
    /// least a second).
    fn waited(response: &Response) -> bool {
        let applied = response.headers().get("preference-applied");
        let seconds = applied.and_then(|v| v.trim().strip_prefix("wait=")?.parse::<u32>().ok());
        seconds.is_some_and(|s| s > 0)
    }

    /// Waits while the server reports the key's first request as still processing; the
    /// caller then asks again, and gets the stored answer once it is complete. Each read
    /// asks the server to answer only when the first request ends, or after `wait_s` (a
    /// long poll); when it does not wait, the reads are `wait_ms` apart, at least a second
    /// (after a wait, [`policy::AFTER_A_WAIT_MS`]).
    async fn await_first(key: &str, mut wait_ms: u32, wait_s: u32) {
        let url = key_url(key);
        for _ in 0..10 {
            pause(wait_ms).await;
            let mut read = Request::get(&url);
            if let Some(prefer) = prefer(wait_s) {
                read = read.header("Prefer", &prefer);
            }
            let Ok(response) = read.send().await else {
                return;
            };
            wait_ms = match waited(&response) {
                true => policy::AFTER_A_WAIT_MS,
                false => wait_ms.max(1_000),
            };
            let status: serde_json::Value = response.json().await.unwrap_or_default();
            if status["state"] != "processing" {
                return;
            }
        }
    }
}

#[cfg(not(feature = "hydrate"))]
mod imp {
    use super::{KeyState, Outcome, Watch};
    use crate::Intent;

    pub async fn pause(_: u32) {}
    pub fn now_ms() -> f64 {
        0.0
    }
    pub fn reload_to(_: &str) {}
    pub fn new_key() -> String {
        String::new()
    }
    pub fn load(_: &str) -> Option<Intent> {
        None
    }
    pub fn save(_: &str, _: &Intent) {}
    pub fn forget(_: &str) {}
    pub fn forget_key(_: &str, _: &str) {}
    pub(crate) async fn key_state(_: &str) -> KeyState {
        KeyState::Unreachable
    }
    pub(crate) async fn deliver(_: &Intent, _: &dyn Watch) -> Outcome {
        Outcome::GaveUp(String::new())
    }
}
