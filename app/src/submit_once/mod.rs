//! `use_submit_once`: the browser's half of the idempotency protocol (docs/design.md, "The
//! browser"). A reusable piece: a page gives it a slot name, the key the server rendered,
//! who owns that key, and what to do on success and on a refusal; the rules live in
//! [`policy`] and can be replaced per page.
//!
//! One *intent* ("place this order", "pay this order") owns one Idempotency-Key until it
//! ends, and the hook guarantees:
//!
//! * **one request in flight**: `busy` is set while a submit runs, and a second `submit`
//!   meanwhile is ignored (the page also disables its button);
//! * **the same key for every try**: network errors and 408, 425, 429, 502, 503, 504 are
//!   sent again under the same key, with full-jitter backoff and `Retry-After` honoured;
//!   409 `request-in-progress` waits for the first try and asks again;
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

mod browser;
pub mod policy;

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, OnceLock,
};

use leptos::prelude::*;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

pub use policy::RetryPolicy;

/// Who decides the intent's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOwner {
    /// The server keeps the key with the thing it is about (the cart's checkout key) and
    /// renders it into every form: the hook never adopts a key stored in the tab, so the
    /// rendered form and the hook always agree.
    Server,
    /// The tab keeps the key in `sessionStorage` until the intent ends (the payment of an
    /// order): a reload or a duplicated tab continues the same intent.
    Tab,
}

/// Whether a finished intent is the page's own or one left in flight by an earlier page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    ThisPage,
    Earlier,
}

/// A definitive refusal, from the server's `application/problem+json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub status: u16,
    /// The last segment of the problem type: `cart-changed`, `out-of-stock`, …
    pub name: String,
    /// The server's explanation, written for people.
    pub detail: String,
}

/// The texts the hook shows while it works; every page can word its own.
#[derive(Clone, Debug)]
pub struct Messages {
    pub sending: &'static str,
    pub resuming: &'static str,
    pub resuming_earlier: &'static str,
    pub retrying: &'static str,
    pub waiting_for_first: &'static str,
    pub slow: &'static str,
    pub still_running: &'static str,
    pub unreachable: &'static str,
    pub server_error: &'static str,
    pub cancelled: &'static str,
}

impl Default for Messages {
    fn default() -> Self {
        Self {
            sending: "Sending…",
            resuming: "Picking up where you left off…",
            resuming_earlier: "We are finishing what you started earlier…",
            retrying: "Connection problem — retrying safely…",
            waiting_for_first: "Still being processed…",
            slow: "This is taking longer than usual. The shop is still working on it; nothing will happen twice.",
            still_running: "The shop is still working on it. Check again in a moment; clicking again is safe.",
            unreachable: "We could not reach the shop. Clicking again is safe: it continues the same request, and never does it twice.",
            server_error: "Something went wrong on our side. Clicking again is safe: it continues the same request, and never does it twice.",
            cancelled: "Stopped waiting. Clicking again is safe: it continues the same request.",
        }
    }
}

/// How a page sets the hook up.
pub struct Options {
    /// The `sessionStorage` slot: one per kind of intent (`checkout`, `pay:<order id>`).
    pub slot: String,
    /// The key the server rendered into the page.
    pub server_key: String,
    pub key_owner: KeyOwner,
    pub policy: RetryPolicy,
    pub messages: Messages,
    /// Whether the request body is kept in `sessionStorage` while in flight, so a reload
    /// can send it again. Off for bodies that must not linger in the browser (a card
    /// number): a reload then only learns whether the server has the key (see
    /// [`SubmitOnce::on_resumed`]).
    pub remember_body: bool,
}

impl Options {
    pub fn new(slot: impl Into<String>, server_key: String, key_owner: KeyOwner) -> Self {
        Self {
            slot: slot.into(),
            server_key,
            key_owner,
            policy: RetryPolicy::default(),
            messages: Messages::default(),
            remember_body: true,
        }
    }
}

/// What the hook says to the shopper: progress, or a problem.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Progress(String),
    Problem(String),
}

impl Status {
    pub fn text(&self) -> &str {
        match self {
            Self::Progress(t) | Self::Problem(t) => t,
        }
    }
    pub fn is_problem(&self) -> bool {
        matches!(self, Self::Problem(_))
    }
}

/// The state a page binds to. Cheap to copy into closures.
#[derive(Clone, Copy)]
pub struct SubmitOnce {
    /// The key the next submit is sent under (the form's hidden field shows it).
    pub key: RwSignal<String>,
    /// A submit is in flight: the button is disabled.
    pub busy: RwSignal<bool>,
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

/// What the server knows of a key, asked before a stored intent is resumed.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum KeyState {
    /// It has the key (running, completed or failed): sending again is a replay or a wait.
    Known,
    /// It never saw the key.
    Unknown,
    /// No answer.
    Unreachable,
}

/// How an intent's delivery ended.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Outcome {
    Done(serde_json::Value),
    Refused(Problem),
    /// Out of patience, a server error, or cancelled: the text to show; the key is kept.
    GaveUp(String),
}

/// A submit's view of its page: every touch checks that the page is still there.
struct Ui {
    hook: SubmitOnce,
    shared: Arc<Shared>,
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    resuming: Option<&'static str>,
}

impl Ui {
    fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::Relaxed)
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Relaxed)
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn progress(&self, text: &str) {
        if self.alive() {
            self.hook
                .status
                .try_set(Some(Status::Progress(text.to_owned())));
        }
    }

    fn finish(&self, intent: Intent, origin: Origin, outcome: Outcome) {
        // The storage first: it must say the truth even when the page is gone. An intent
        // given up stays recorded as in flight, so a reload asks the server what became
        // of it; one that ended is forgotten.
        if !matches!(outcome, Outcome::GaveUp(_)) {
            browser::forget_key(&self.shared.options.slot, &intent.key);
        }
        if !self.alive() {
            return;
        }
        self.hook.busy.try_set(false);
        match outcome {
            Outcome::Done(body) => {
                self.hook.status.try_set(None);
                self.next_key_for_tab(origin);
                if let Err(why) = (self.shared.on_success)(body, origin) {
                    leptos::logging::warn!("unexpected answer to {:?}: {why}", intent.url);
                }
            }
            Outcome::Refused(problem) => {
                self.hook
                    .status
                    .try_set(Some(Status::Problem(problem.detail.clone())));
                self.next_key_for_tab(origin);
                (self.shared.on_refused)(problem, origin);
            }
            Outcome::GaveUp(text) => {
                self.hook.status.try_set(Some(Status::Problem(text)));
            }
        }
    }

    /// A resumed intent the server never saw: forgotten, and the page is left as it is.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn drop_unsent(&self, intent: &Intent) {
        browser::forget_key(&self.shared.options.slot, &intent.key);
        if self.alive() {
            self.hook.busy.try_set(false);
            self.hook.status.try_set(None);
        }
    }

    /// A resumed intent the server has, whose body was not kept: the page takes over.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn resumed_without_body(&self, intent: &Intent, origin: Origin) {
        browser::forget_key(&self.shared.options.slot, &intent.key);
        if self.alive() {
            self.hook.busy.try_set(false);
            self.hook.status.try_set(None);
            if let Some(f) = self.shared.on_resumed.get() {
                f(origin);
            }
        }
    }

    /// A tab-owned key ends with its intent: the next submit is a new intent.
    fn next_key_for_tab(&self, origin: Origin) {
        if self.shared.options.key_owner == KeyOwner::Tab && origin == Origin::ThisPage {
            self.hook.key.try_set(browser::new_key());
        }
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
