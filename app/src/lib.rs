//! The Once user interface. The server renders every page; the wasm bundle hydrates only
//! the islands, the controls that change something (add to cart, the cart editor with the
//! checkout form, the order's payment and progress, the header's cart count), so that a
//! slow phone downloads and runs little (docs/design.md, "What the browser runs"). It holds
//! no SQL: on the server its server functions call the [`backend`] handle that the `server`
//! crate provides through Leptos context.

// The order page's view type, with its island nested inside, is deeper than the compiler's
// default limit (in this crate and in the server, which renders it).
#![recursion_limit = "256"]

pub mod api;
#[cfg(feature = "ssr")]
pub mod backend;
mod components;
pub mod messages;
mod pages;
pub mod query;
#[cfg(feature = "ssr")]
pub mod site_files;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    ParamSegment, SsrMode, StaticSegment,
};

use components::{form_error::FormError, header::Header};
use pages::{
    checkout::CheckoutPage, home::HomePage, not_found::NotFoundPage, order::OrderPage,
    orders::OrdersPage,
};

/// The HTML document around the app; rendered on the server only. Its stylesheet is named
/// by the [`site_files::SiteFiles`] the server provides (read once at start, and shared with
/// the operator console), or read from the build's names when none was provided.
#[cfg(feature = "ssr")]
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let stylesheet = use_context::<std::sync::Arc<site_files::SiteFiles>>().map_or_else(
        || site_files::SiteFiles::of(&options).stylesheet_href(),
        |site| site.stylesheet_href(),
    );
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                <link rel="stylesheet" id="leptos" href=stylesheet/>
                <HydrationScripts options islands=true/>
                <leptos_meta::MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Once — a shop that charges you exactly once"/>
        <Router>
            <Header/>
            <main class="page">
                <FormError/>
                <Routes fallback=NotFoundPage>
                    <Route path=StaticSegment("") view=HomePage/>
                    // Rendered whole before they are sent, so that the head names what only
                    // the page's data tells: the chunks of its lazy island, to load alongside
                    // the bundle, and the order's title (no script replaces it after a load).
                    <Route path=StaticSegment("checkout") view=CheckoutPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("orders") view=OrdersPage/>
                    <Route path=(StaticSegment("orders"), ParamSegment("id")) view=OrderPage ssr=SsrMode::Async/>
                </Routes>
            </main>
            <footer class="footer">"Once — every click counts exactly once."</footer>
        </Router>
    }
}

/// The wasm entry point's part: the islands hydrate themselves (the script Leptos writes calls
/// them); a page without any is marked live here.
pub fn hydrate() {
    components::live::mark_if_no_islands();
}
