//! What the server logs while a test runs. One subscriber serves the whole test process
//! and hands each event to the capture of the thread it happened on: a `#[tokio::test]`
//! runs its server's tasks on its own thread, so each test hears its own server and no
//! other test's. (A subscriber per thread, `set_default`, lost events: a callsite another
//! test's thread met first, with no subscriber of its own, could be cached as disabled.)

use std::{
    cell::RefCell,
    sync::{Arc, Mutex, Once},
};

use tracing::{field::Field, Level, Subscriber};
use tracing_subscriber::{layer::Context, prelude::*, Layer};

/// The events heard so far: their level and their message with their fields.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<(Level, String)>>>);

thread_local! {
    static HEARING: RefCell<Option<Logs>> = const { RefCell::new(None) };
}

/// Hears this thread's events until it drops.
pub struct Hearing(());

impl Drop for Hearing {
    fn drop(&mut self) {
        HEARING.with(|h| h.borrow_mut().take());
    }
}

/// The process's subscriber: passes each event to its thread's capture, if any.
struct ToTheThreadsCapture;

impl<S: Subscriber> Layer<S> for ToTheThreadsCapture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        HEARING.with(|h| {
            if let Some(logs) = h.borrow().as_ref() {
                logs.record(event);
            }
        });
    }
}

impl Logs {
    /// Starts hearing this thread's events, until the guard drops.
    pub fn capture() -> (Self, Hearing) {
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            let subscriber = tracing_subscriber::registry().with(ToTheThreadsCapture);
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other subscriber is set for the whole process (TEST_LOG sets one)");
        });
        let logs = Self::default();
        HEARING.with(|h| *h.borrow_mut() = Some(logs.clone()));
        (logs, Hearing(()))
    }

    /// The lines heard at `level`.
    pub fn at(&self, level: Level) -> Vec<String> {
        let heard = self.0.lock().unwrap();
        heard
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, line)| line.clone())
            .collect()
    }

    fn record(&self, event: &tracing::Event<'_>) {
        let mut line = String::new();
        event.record(&mut |field: &Field, value: &dyn std::fmt::Debug| {
            line.push_str(&format!("{}={value:?} ", field.name()));
        });
        let level = *event.metadata().level();
        self.0.lock().unwrap().push((level, line));
    }
}
