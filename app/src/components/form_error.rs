use leptos::{prelude::*, server_fn::error::ServerFnUrlError};
use leptos_router::hooks::use_query_map;

use crate::api::shown_error;

/// Why a form posted without wasm was refused. The server sends such a form back to its page
/// with the error in the URL (`__err`); this shows it, on the server-rendered page and after
/// hydration alike.
#[component]
pub fn FormError() -> impl IntoView {
    let error = move || {
        use_query_map()
            .read()
            .get("__err")
            .map(|encoded| shown_error(&ServerFnUrlError::<ServerFnError>::decode_err(&encoded)))
    };
    move || {
        error()
            .map(|text| view! { <p class="error" role="alert" data-testid="form-error">{text}</p> })
    }
}
