use leptos::prelude::*;

use super::cart_count::CartCount;
use crate::api::get_cart;

/// The shop's top bar, rendered on the server. Only the cart's count is live (an island),
/// so that adds and changes show in it without a reload.
#[component]
pub fn Header() -> impl IntoView {
    let cart = Resource::new(|| (), |_| get_cart());
    view! {
        <header class="topbar">
            <a class="brand" href="/">"Once"</a>
            <nav>
                <a href="/">"Shop"</a>
                <a href="/orders">"My orders"</a>
                <a class="cart-count" href="/checkout" data-testid="cart-count">
                    // Awaited inside `Suspend` rather than read with `.get()`: reading
                    // resources reactively in several Suspense boundaries can stall the
                    // server-side stream (leptos-rs/leptos#4578).
                    <Suspense fallback=|| "Cart">
                        {move || Suspend::new(async move {
                            let count = cart.await.ok().map(|c| c.item_count());
                            view! { <CartCount count/> }
                        })}
                    </Suspense>
                </a>
            </nav>
        </header>
    }
}
