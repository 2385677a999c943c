//! The wasm entry point: the script Leptos writes into each page calls `hydrate`, then each
//! island's own entry point (exported by the `app` crate). Nothing else lives here.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
    app::hydrate();
}
