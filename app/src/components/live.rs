use std::cell::Cell;

use leptos::prelude::*;

thread_local! {
    /// How many islands of this page have hydrated (the browser's one thread).
    static LIVE: Cell<u32> = const { Cell::new(0) };
}

/// Counts the calling island as live once it has hydrated; when every island of the page is,
/// sets `data-hydrated` on `<body>`, so that tests (and curious developers) can tell
/// server-rendered HTML from controls that are live. Effects never run on the server.
pub fn mark_live() {
    Effect::new(|_| {
        let live = LIVE.with(|n| {
            n.set(n.get() + 1);
            n.get()
        });
        if live >= islands_on_page() {
            mark_body();
        }
    });
}

/// For a page without islands: the bundle has loaded, and nothing is left to hydrate.
pub fn mark_if_no_islands() {
    if islands_on_page() == 0 {
        mark_body();
    }
}

fn islands_on_page() -> u32 {
    document()
        .get_elements_by_tag_name("leptos-island")
        .length()
}

fn mark_body() {
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
