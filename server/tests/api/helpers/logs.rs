//! What the server logs while a test runs: events recorded by a subscriber set for this
//! thread only. A `#[tokio::test]` runs its server's tasks on its own thread, so each test
//! hears its own server and no other test's.

use std::sync::{Arc, Mutex};

use tracing::{field::Field, Level, Subscriber};
use tracing_subscriber::{layer::Context, prelude::*, Layer};

/// The events heard so far: their level and their message with their fields.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<(Level, String)>>>);

impl Logs {
    /// Starts hearing this thread's events, until the guard drops.
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::registry().with(logs.clone());
        let guard = tracing::subscriber::set_default(subscriber);
        (logs, guard)
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
}

impl<S: Subscriber> Layer<S> for Logs {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut line = String::new();
        event.record(&mut |field: &Field, value: &dyn std::fmt::Debug| {
            line.push_str(&format!("{}={value:?} ", field.name()));
        });
        let level = *event.metadata().level();
        self.0.lock().unwrap().push((level, line));
    }
}
