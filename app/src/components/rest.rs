use std::time::Duration;

use leptos::prelude::*;

/// A control's rest after a write that succeeded: a moment in which it takes no click, so
/// that the second click of a double click, which a fast shop has already answered the first
/// of, does not become a second write. Copied freely into closures, like a signal.
#[derive(Clone, Copy)]
pub struct Rest {
    resting: RwSignal<bool>,
    /// The rest's end, cancelled when it ends sooner, so that an earlier rest's timer never
    /// cuts a later one short.
    timer: StoredValue<Option<TimeoutHandle>>,
}

impl Rest {
    pub fn new() -> Self {
        Self {
            resting: RwSignal::new(false),
            timer: StoredValue::new(None),
        }
    }

    /// Starts a rest of `length`, replacing any rest under way.
    pub fn start(self, length: Duration) {
        self.cancel_timer();
        self.resting.set(true);
        // The island may be gone when the rest ends (another page): then nothing is woken.
        let resting = self.resting;
        let timer = set_timeout_with_handle(
            move || {
                let _ = resting.try_set(false);
            },
            length,
        );
        self.timer.set_value(timer.ok());
    }

    /// Ends the rest now (the shopper changed what the next write will be).
    pub fn end(self) {
        self.cancel_timer();
        self.resting.set(false);
    }

    /// Whether it rests, tracked (for the view).
    pub fn resting(self) -> bool {
        self.resting.get()
    }

    /// Whether it rests, untracked (for an event handler).
    pub fn resting_now(self) -> bool {
        self.resting.get_untracked()
    }

    fn cancel_timer(self) {
        if let Some(timer) = self.timer.get_value() {
            timer.clear();
        }
        self.timer.set_value(None);
    }
}

impl Default for Rest {
    fn default() -> Self {
        Self::new()
    }
}
