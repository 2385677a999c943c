use leptos::prelude::*;
use leptos_meta::Title;

/// Any path the shop does not know: a page that says so, with the HTTP status 404.
#[component]
pub fn NotFoundPage() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Page not found · Once"/>
        <h1 tabindex="-1">"Page not found"</h1>
        <p class="empty">"There is nothing at this address."</p>
        <p><a href="/">"Go to the shop"</a></p>
    }
}
