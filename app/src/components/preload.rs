use leptos::prelude::*;

/// Names the wasm chunks of a lazy island in the page's head, so that the browser fetches them
/// alongside the bundle rather than after it has started. Rendered on the server, in a page
/// rendered whole (`SsrMode::Async`), whose head is written after its body; it goes through
/// Leptos's own preloading of lazy code, whose chunk list (the split build's manifest) the
/// hydration scripts read. `island` is the start of the island's loader's name in that list
/// (its end is a hash the build makes). Without a split build it names nothing.
#[component]
pub fn PreloadLazyIsland(island: &'static str) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(manifest) = use_context::<leptos::WasmSplitManifest>() {
        if let Some(split) = manifest.0.try_read_value() {
            split
                .1
                .keys()
                .filter(|name| name.starts_with(island))
                .for_each(|name| leptos::prefetch_lazy_fn_on_server(names::interned(name)));
        }
    }
    #[cfg(not(feature = "ssr"))]
    let _ = island;
}

#[cfg(feature = "ssr")]
mod names {
    use std::{collections::BTreeSet, sync::Mutex};

    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

    /// The `'static` name Leptos wants, made once per name of the manifest (a handful).
    pub fn interned(name: &str) -> &'static str {
        let mut names = NAMES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match names.get(name) {
            Some(known) => known,
            None => {
                let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
                names.insert(leaked);
                leaked
            }
        }
    }
}
