use leptos::prelude::*;
use leptos_router::hooks::use_location;

/// Moves the keyboard focus to the new page's heading after every client-side navigation,
/// as a full page load would start reading at the top: a screen reader announces the new
/// page, and Tab continues from there. Headings carry `tabindex="-1"` for this.
#[component]
pub fn FocusOnNavigate() -> impl IntoView {
    let path = use_location().pathname;
    Effect::new(move |previous: Option<String>| {
        let now = path.get();
        if previous.as_ref().is_some_and(|p| *p != now) {
            focus_heading();
        }
        now
    });
}

/// Focuses `main h1` once the new page has rendered it (pages load their data first).
fn focus_heading() {
    leptos::task::spawn_local(async {
        for _ in 0..50 {
            once_leptos::pause(50).await;
            if let Some(heading) = document()
                .query_selector("main h1")
                .ok()
                .flatten()
                .and_then(|h| {
                    leptos::wasm_bindgen::JsCast::dyn_into::<leptos::web_sys::HtmlElement>(h).ok()
                })
            {
                let _ = heading.focus();
                return;
            }
        }
    });
}
