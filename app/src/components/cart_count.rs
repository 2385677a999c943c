use leptos::prelude::*;

use super::live::mark_live;

/// The window event that carries the cart's new item count, from whichever island changed
/// the cart to the header's count (islands share no reactive state).
const CART_COUNT_EVENT: &str = "once:cart-count";

/// The header's "Cart (n)" link text: an island of its own, so that an add or a change of
/// the cart shows at once while the rest of the header stays server-rendered. `None` when
/// the cart could not be read.
#[island]
pub fn CartCount(count: Option<u32>) -> impl IntoView {
    let count = RwSignal::new(count);
    let listener = window_event_listener(
        leptos::ev::Custom::<leptos::ev::CustomEvent>::new(CART_COUNT_EVENT),
        move |event| {
            if let Some(n) = event.detail().as_f64() {
                count.set(Some(n as u32));
            }
        },
    );
    on_cleanup(move || listener.remove());
    mark_live();
    view! {
        <span>{move || count.get().map_or_else(|| "Cart".to_owned(), |n| format!("Cart ({n})"))}</span>
    }
}

/// Tells the header's count that the cart now holds `count` items.
pub fn announce(count: u32) {
    #[cfg(feature = "hydrate")]
    {
        let init = web_sys::CustomEventInit::new();
        init.set_detail(&f64::from(count).into());
        if let Ok(event) = web_sys::CustomEvent::new_with_event_init_dict(CART_COUNT_EVENT, &init) {
            let _ = window().dispatch_event(&event);
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = count;
}
