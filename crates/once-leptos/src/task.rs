//! A submit's task: it delivers one intent and records how it ended. It keeps what it
//! needs outside the reactive system and checks, before every touch of the page, that the
//! page still exists, so it can outlive its page without a panic.

use std::sync::{atomic::Ordering, Arc};

use leptos::prelude::*;

use crate::{
    browser::{self, Outcome, Watch},
    Intent, KeyOwner, Options, Origin, Shared, Status, SubmitOnce,
};

/// A submit's view of its page: every touch checks that the page is still there.
pub(super) struct Ui {
    pub(super) hook: SubmitOnce,
    pub(super) shared: Arc<Shared>,
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub(super) resuming: Option<&'static str>,
}

impl Ui {
    pub(super) fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::Relaxed)
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub(super) fn cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Relaxed)
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub(super) fn progress(&self, text: &str) {
        if self.alive() {
            self.hook
                .status
                .try_set(Some(Status::Progress(text.to_owned())));
        }
    }

    pub(super) fn finish(&self, intent: Intent, origin: Origin, outcome: Outcome) {
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
    pub(super) fn drop_unsent(&self, intent: &Intent) {
        browser::forget_key(&self.shared.options.slot, &intent.key);
        if self.alive() {
            self.hook.busy.try_set(false);
            self.hook.status.try_set(None);
        }
    }

    /// A resumed intent the server has, whose body was not kept: the page takes over.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub(super) fn resumed_without_body(&self, intent: &Intent, origin: Origin) {
        browser::forget_key(&self.shared.options.slot, &intent.key);
        if self.alive() {
            self.hook.busy.try_set(false);
            self.hook.status.try_set(None);
            // Its body is gone, so its key cannot be sent again: the next click is new.
            self.next_key_for_tab(origin);
            if let Some(f) = self.shared.on_resumed.get() {
                f(origin);
            }
        }
    }

    /// A tab-owned key ends with its intent: the next submit is a new intent.
    pub(super) fn next_key_for_tab(&self, origin: Origin) {
        if self.shared.options.key_owner == KeyOwner::Tab && origin == Origin::ThisPage {
            self.hook.key.try_set(browser::new_key());
        }
    }
}

/// What a delivery watches: the page's options, whether the submit was cancelled, and
/// where its progress is shown.
impl Watch for Ui {
    fn options(&self) -> &Options {
        &self.shared.options
    }

    fn resuming(&self) -> Option<&'static str> {
        self.resuming
    }

    fn progress(&self, text: &str) {
        Ui::progress(self, text)
    }

    fn cancelled(&self) -> bool {
        Ui::cancelled(self)
    }
}
