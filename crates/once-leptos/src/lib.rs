//! [`use_submit_once`]: the browser's half of the idempotency protocol. A reusable piece: a
//! page gives it a slot name, the key the server rendered, who owns that key ([`Options`]),
//! and what to do on success and on a refusal; the rules live in [`policy`] and can be
//! replaced per page ([`RetryPolicy`]), and so can the texts it shows ([`Messages`]).
//!
//! One *intent* ("place this order", "pay this order") owns one Idempotency-Key until it
//! ends, and the hook guarantees:
//!
//! * **one request in flight**: `busy` is set while a submit runs, and a second `submit`
//!   meanwhile is ignored (the page also disables its button);
//! * **the same key for every try**: network errors and 408, 425, 429, 502, 503, 504 are
//!   sent again under the same key, with full-jitter backoff and `Retry-After` honoured;
//!   409 `request-in-progress` waits for the first try and asks again. Every request asks
//!   the server to wait for the key's running first try (`Prefer: wait`,
//!   [`RetryPolicy::prefer_wait_s`]), so a repeat is answered when that try ends, not told
//!   409 and left to poll; a server that does not wait is polled as before;
//! * **a reload resumes**: the intent in flight is kept in `sessionStorage` and sent again
//!   after a reload, under the same key, if it is younger than the server keeps keys;
//! * **an earlier intent is never acted on silently**: where the server owns the key (the
//!   checkout: one key per cart), an intent left in flight under another key is finished
//!   with a message saying so, and handed to the page as [`Origin::Earlier`];
//! * **leaving the page is safe**: a submit in flight outlives its page; once the page is
//!   gone it only records the end of the intent, never touches the page or calls it back;
//! * **the key ends only with the intent**: on success or a definitive refusal (see
//!   [`policy::ends_key`]); when the hook gives up, the key is kept so the next click is
//!   the same intent, never a second one.
//!
//! The browser build enables the feature `hydrate`, which gives the hook its HTTP calls,
//! timers, `sessionStorage` and random keys. Without it (the server's build, for server-side
//! rendering) the hook only renders: [`SubmitOnce::submit`] sends nothing, [`new_key`] is
//! empty, [`pause`] returns at once and [`reload_to`] does nothing.
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod browser;
mod options;
pub mod policy;
mod task;

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, OnceLock,
};

use leptos::prelude::*;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use browser::{KeyState, Outcome};
pub use options::{KeyOwner, Messages, Options, Origin, Problem, Status};
pub use policy::RetryPolicy;
use task::Ui;

/// The state a page binds to. Cheap to copy into closures.
#[derive(Clone, Copy)]
pub struct SubmitOnce {
    /// The key the next submit is sent under (the form's hidden field shows it).
    pub key: RwSignal<String>,
    /// A submit is in flight: the button is disabled.
    pub busy: RwSignal<bool>,
    /// What the hook says to the shopper (progress, or a problem); `None` when it has
    /// nothing to say.
    pub status: RwSignal<Option<Status>>,
    shared: StoredValue<Arc<Shared>>,
}

type SuccessHandler = Box<dyn Fn(serde_json::Value, Origin) -> Result<(), String> + Send + Sync>;
type RefusalHandler = Box<dyn Fn(Problem, Origin) + Send + Sync>;
type ResumeHandler = Box<dyn Fn(Origin) + Send + Sync>;

/// What a submit's task needs, kept outside the reactive system so that the task can
/// outlive its page: only `alive` tells it whether the page's signals still exist.
struct Shared {
    options: Options,
    on_success: SuccessHandler,
    on_refused: RefusalHandler,
    on_resumed: OnceLock<ResumeHandler>,
    alive: AtomicBool,
    cancelled: AtomicBool,
}

/// What is kept in `sessionStorage` under the slot. `url` and `body` are set while a
/// submit is in flight, so that a reload can resume it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Intent {
    key: String,
    url: Option<String>,
    body: Option<String>,
    /// When the key was first used (ms since the epoch): a key older than the server's
    /// retention is forgotten there, so its intent is never resumed.
    since_ms: f64,
}

impl Intent {
    fn in_flight(&self) -> bool {
        self.url.is_some()
    }
}

/// Creates the hook for one kind of intent. `on_success` gets the decoded 2xx body (first
/// execution or replay, the same either way); `on_refused` gets a definitive refusal after
/// the hook has shown it.
pub fn use_submit_once<T: DeserializeOwned>(
    options: Options,
    on_success: impl Fn(T, Origin) + Send + Sync + 'static,
    on_refused: impl Fn(Problem, Origin) + Send + Sync + 'static,
) -> SubmitOnce {
    let on_success: SuccessHandler = Box::new(move |body, origin| {
        let value = serde_json::from_value::<T>(body).map_err(|e| e.to_string())?;
        on_success(value, origin);
        Ok(())
    });
    let hook = SubmitOnce {
        key: RwSignal::new(options.server_key.clone()),
        busy: RwSignal::new(false),
        status: RwSignal::new(None),
        shared: StoredValue::new(Arc::new(Shared {
            options,
            on_success,
            on_refused: Box::new(on_refused),
            on_resumed: OnceLock::new(),
            alive: AtomicBool::new(true),
            cancelled: AtomicBool::new(false),
        })),
    };
    let shared = hook.shared.get_value();
    on_cleanup(move || shared.alive.store(false, Ordering::Relaxed));
    // Runs in the browser only, once hydrated.
    Effect::new(move |_| hook.adopt_stored_intent());
    hook
}

impl SubmitOnce {
    /// Sends `body` to `url` under the intent's key; ignored while a submit is in flight.
    pub fn submit(self, url: &str, body: String) {
        if self.busy.get_untracked() {
            return;
        }
        let shared = self.shared.get_value();
        let key = self.key.get_untracked();
        let since_ms = browser::load(&shared.options.slot)
            .filter(|stored| stored.key == key)
            .map_or_else(browser::now_ms, |stored| stored.since_ms);
        let intent = Intent {
            key,
            url: Some(url.to_owned()),
            body: Some(body),
            since_ms,
        };
        let kept = Intent {
            body: intent.body.clone().filter(|_| shared.options.remember_body),
            ..intent.clone()
        };
        browser::save(&shared.options.slot, &kept);
        let sending = shared.options.messages.sending;
        self.status.set(Some(Status::Progress(sending.into())));
        self.send(intent, Origin::ThisPage, None);
    }

    /// What the page does when a reload finds an intent whose body was not kept, and the
    /// server has its key: the hook cannot send it again, so the page shows the outcome
    /// its own way (the order page follows the order's status).
    pub fn on_resumed(self, f: impl Fn(Origin) + Send + Sync + 'static) -> Self {
        let _ = self.shared.get_value().on_resumed.set(Box::new(f));
        self
    }

    /// Stops waiting for the submit in flight, before its next try; the request already
    /// sent is still answered (`busy` until then). The key is kept: what the server may
    /// have done is found again by the next submit, never done twice.
    pub fn cancel(self) {
        self.shared
            .get_value()
            .cancelled
            .store(true, Ordering::Relaxed);
    }

    /// Resumes an intent left in flight by a reload or an earlier page; for a tab-owned
    /// key, continues the tab's unfinished intent.
    fn adopt_stored_intent(self) {
        let shared = self.shared.get_value();
        let Options {
            slot,
            server_key,
            key_owner,
            policy,
            messages,
            ..
        } = &shared.options;
        let stored = browser::load(slot)
            .filter(|s| browser::now_ms() - s.since_ms < policy.resume_within_ms);
        match stored {
            Some(stored) if stored.in_flight() => {
                let origin = if *key_owner == KeyOwner::Server && stored.key != *server_key {
                    Origin::Earlier
                } else {
                    self.key.set(stored.key.clone());
                    Origin::ThisPage
                };
                let text = match origin {
                    Origin::ThisPage => messages.resuming,
                    Origin::Earlier => messages.resuming_earlier,
                };
                self.status.set(Some(Status::Progress(text.into())));
                self.send(stored, origin, Some(text));
            }
            Some(stored) if *key_owner == KeyOwner::Tab => self.key.set(stored.key),
            _ if *key_owner == KeyOwner::Tab => browser::save(
                slot,
                &Intent {
                    key: server_key.clone(),
                    url: None,
                    body: None,
                    since_ms: browser::now_ms(),
                },
            ),
            _ => browser::forget(slot),
        }
    }

    /// Delivers `intent` in a task of its own. A resumed intent keeps saying so (`resuming`)
    /// while it waits for its first try, so the shopper knows what the page is finishing.
    fn send(self, intent: Intent, origin: Origin, resuming: Option<&'static str>) {
        let shared = self.shared.get_value();
        shared.cancelled.store(false, Ordering::Relaxed);
        self.busy.set(true);
        let ui = Ui {
            hook: self,
            shared: shared.clone(),
            resuming,
        };
        leptos::task::spawn_local(async move {
            if resuming.is_some() {
                match browser::key_state(&intent.key).await {
                    // Never reached the shop: nothing to finish, and an old click is no
                    // consent to send it now (the shopper may have left on purpose).
                    KeyState::Unknown => return ui.drop_unsent(&intent),
                    KeyState::Unreachable => {
                        let text = ui.shared.options.messages.unreachable.to_owned();
                        return ui.finish(intent, origin, Outcome::GaveUp(text));
                    }
                    KeyState::Known if intent.body.is_none() => {
                        return ui.resumed_without_body(&intent, origin)
                    }
                    KeyState::Known => {}
                }
            }
            let outcome = browser::deliver(&intent, &ui).await;
            ui.finish(intent, origin, outcome);
        });
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

/// A fresh Idempotency-Key made in the browser (a version 4 UUID); empty on the server.
pub fn new_key() -> String {
    browser::new_key()
}
