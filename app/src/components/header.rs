use leptos::prelude::*;
use leptos_router::hooks::use_location;

use crate::api::{get_cart, AddToCart};

/// The shop's top bar with the cart count. It re-reads the cart whenever an
/// "Add to cart" action (anywhere on the page) completes, and on every navigation (a placed
/// order empties the cart).
#[component]
pub fn Header() -> impl IntoView {
    let add = use_context::<ServerAction<AddToCart>>();
    let path = use_location().pathname;
    let cart = Resource::new(
        move || {
            (
                add.map(|a| a.version().get()).unwrap_or_default(),
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
                    <Suspense fallback=|| "Cart">
                        {move || cart.get().map(|c| match c {
                            Ok(c) => format!("Cart ({})", c.item_count()),
                            Err(_) => "Cart".to_owned(),
                        })}
                    </Suspense>
                </a>
            </nav>
        </header>
    }
}
