//! The databases tests make are dropped by the tests that made them: when the last handle
//! on one is dropped — at the end of its test, passed or failed (a panic unwinds through
//! the drop) — it is dropped on the server too. A run killed outright leaves them to the
//! next `scripts/test`, which sweeps the project's names at its start and fails at its end
//! if any remain.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, Weak},
};

use sqlx::{Connection, PgConnection};

use super::admin_url;

/// A test's database, dropped when the last handle on it goes.
pub struct TestDatabase {
    name: String,
}

/// The databases alive in this test binary, by name: a second server started on a test's
/// database (a restart, another instance) shares the first one's handle.
fn live() -> &'static Mutex<HashMap<String, Weak<TestDatabase>>> {
    static LIVE: OnceLock<Mutex<HashMap<String, Weak<TestDatabase>>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

impl TestDatabase {
    /// The handle on database `name` (which need not exist yet: a server creates its own).
    /// Take it before anything can create the database. Once the last handle on a name has
    /// gone, the database is dropped: a server started on that name later gets a new, empty
    /// one (tests keep the first instance alive while they start another).
    pub fn named(name: &str) -> Arc<TestDatabase> {
        let mut live = live().lock().expect("the registry");
        if let Some(database) = live.get(name).and_then(Weak::upgrade) {
            return database;
        }
        let database = Arc::new(TestDatabase {
            name: name.to_owned(),
        });
        live.insert(name.to_owned(), Arc::downgrade(&database));
        database
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let mut live = live()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if live.get(&self.name).is_some_and(|w| w.strong_count() == 0) {
            live.remove(&self.name);
        }
        drop(live);
        drop_database(&self.name);
    }
}

/// Drops database `name` now (`WITH (FORCE)`: the test's servers may still hold
/// connections). On a thread of its own, with its own runtime: a drop may run inside the
/// test's runtime, which cannot be blocked on from within.
pub fn drop_database(name: &str) {
    let statement = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
    let dropped = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let mut admin = PgConnection::connect(&format!("{}/postgres", admin_url()))
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query(&statement)
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(())
        })
    })
    .join();
    match dropped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("test database {name} was not dropped: {e}"),
        Err(_) => eprintln!("test database {name} was not dropped: the dropping thread panicked"),
    }
}
