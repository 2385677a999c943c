//! What a page tells the hook, and what the hook tells the page.

use crate::RetryPolicy;

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
