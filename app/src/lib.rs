//! The Once user interface, shared by server-side rendering and the hydrated wasm bundle.
//! It holds no SQL: on the server its server functions call the [`backend`] handle that
//! the `server` crate provides through Leptos context.

pub mod api;
#[cfg(feature = "ssr")]
pub mod backend;
mod components;
pub mod messages;
mod pages;
pub mod query;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    ParamSegment, StaticSegment,
};

use components::{focus::FocusOnNavigate, form_error::FormError, header::Header};
use pages::{
    checkout::CheckoutPage, home::HomePage, not_found::NotFoundPage, order::OrderPage,
    orders::OrdersPage,
};

/// The HTML document around the app; rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
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
    // Shared actions, so the header's cart count follows every change of the cart.
    provide_context(ServerAction::<api::AddToCart>::new());
    provide_context(ServerAction::<api::SetCartQuantity>::new());
    mark_hydrated();
    view! {
        <Stylesheet id="leptos" href="/pkg/once.css"/>
        <Title text="Once — a shop that charges you exactly once"/>
        <Router>
            <FocusOnNavigate/>
            <Header/>
            <main class="page">
                <FormError/>
                <Routes fallback=NotFoundPage>
                    <Route path=StaticSegment("") view=HomePage/>
                    <Route path=StaticSegment("checkout") view=CheckoutPage/>
                    <Route path=StaticSegment("orders") view=OrdersPage/>
                    <Route path=(StaticSegment("orders"), ParamSegment("id")) view=OrderPage/>
                </Routes>
            </main>
            <footer class="footer">"Once — every click counts exactly once."</footer>
        </Router>
    }
}

/// Sets `data-hydrated` on `<body>` once the wasm bundle has taken over the page, so that
/// tests (and curious developers) can tell server-rendered HTML from a live app.
fn mark_hydrated() {
    Effect::new(|_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
}
