use leptos::prelude::*;
use leptos_router::hooks::use_location;

use crate::api::{get_cart, AddToCart, SetCartQuantity};

/// The shop's top bar with the cart count. It re-reads the cart whenever an
/// "Add to cart" action (anywhere on the page) completes, and on every navigation (a placed
/// order empties the cart).
#[component]
pub fn Header() -> impl IntoView {
    let add = use_context::<ServerAction<AddToCart>>();
    let edit = use_context::<ServerAction<SetCartQuantity>>();
    let path = use_location().pathname;
    let cart = Resource::new(
        move || {
            (
                add.map(|a| a.version().get()).unwrap_or_default(),
                edit.map(|a| a.version().get()).unwrap_or_default(),
                path.get(),
            )
        },
        |_| get_cart(),
    );
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
                            match cart.await {
                                Ok(c) => format!("Cart ({})", c.item_count()),
                                Err(_) => "Cart".to_owned(),
                            }
                        })}
                    </Suspense>
                </a>
            </nav>
        </header>
    }
}
