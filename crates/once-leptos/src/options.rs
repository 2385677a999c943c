//! What a page tells the hook, and what the hook tells the page.

use crate::RetryPolicy;

/// Who decides the intent's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum Origin {
    /// This page's own intent, sent from it or resumed after its reload.
    ThisPage,
    /// An intent an earlier page left in flight under another key (where the server owns
    /// the key): the page shows what became of it, and must not act on it as its own.
    Earlier,
}

/// A definitive refusal, from the server's `application/problem+json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The HTTP status (a 4xx).
    pub status: u16,
    /// The last segment of the problem type: `cart-changed`, `out-of-stock`, …
    pub name: String,
    /// The server's explanation, written for people.
    pub detail: String,
}

/// The texts the hook shows while it works; every page can word its own.
#[derive(Clone, Debug)]
pub struct Messages {
    /// While a submit's first try is on its way.
    pub sending: &'static str,
    /// While an intent of this page, left in flight by a reload, is resumed.
    pub resuming: &'static str,
    /// While an intent an earlier page left in flight ([`Origin::Earlier`]) is finished.
    pub resuming_earlier: &'static str,
    /// While a network error or a retryable status is sent again under the same key.
    pub retrying: &'static str,
    /// While a 409 `request-in-progress` waits for the key's first request.
    pub waiting_for_first: &'static str,
    /// When the key's first request has been running for longer than
    /// [`RetryPolicy::slow_after_ms`](crate::RetryPolicy::slow_after_ms).
    pub slow: &'static str,
    /// Given up waiting for the key's first request (the key is kept).
    pub still_running: &'static str,
    /// Given up after network errors or retryable statuses (the key is kept).
    pub unreachable: &'static str,
    /// Given up on a server error, a 5xx that is not retried (the key is kept).
    pub server_error: &'static str,
    /// After [`SubmitOnce::cancel`](crate::SubmitOnce::cancel) (the key is kept).
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
    /// Who decides the intent's key: the server, or the tab.
    pub key_owner: KeyOwner,
    /// When to retry and for how long to wait; [`RetryPolicy::default`] unless changed.
    pub policy: RetryPolicy,
    /// The texts the hook shows; [`Messages::default`] unless changed.
    pub messages: Messages,
    /// Whether the request body is kept in `sessionStorage` while in flight, so a reload
    /// can send it again. Off for bodies that must not linger in the browser (a card
    /// number): a reload then only learns whether the server has the key (see
    /// [`SubmitOnce::on_resumed`](crate::SubmitOnce::on_resumed)).
    pub remember_body: bool,
}

impl Options {
    /// Options for the intent kept in `slot`, with the key the server rendered: the default
    /// policy and texts, and the body remembered for a reload.
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
#[non_exhaustive]
pub enum Status {
    /// The hook is working on the intent: sending, retrying, waiting or resuming.
    Progress(String),
    /// The intent was refused, or the hook gave up (the key is kept): the reason.
    Problem(String),
}

impl Status {
    /// The text to show.
    pub fn text(&self) -> &str {
        match self {
            Self::Progress(t) | Self::Problem(t) => t,
        }
    }

    /// Whether it is a problem (shown as an error) rather than progress.
    pub fn is_problem(&self) -> bool {
        matches!(self, Self::Problem(_))
    }
}
