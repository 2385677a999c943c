use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::{fresh_key, list_products},
    components::add_to_cart::AddToCartForm,
};
use domain::{format_money, Product};

/// The catalog, rendered on the server; each card's "Add to cart" form is an island.
#[component]
pub fn HomePage() -> impl IntoView {
    let products = Resource::new(|| (), |_| list_products());
    // One key per rendering of the "Add to cart" forms, from the server so that a form
    // posted before hydration carries one too.
    let add_key = Resource::new(|| (), |_| fresh_key());
    view! {
        <Title text="Once — a shop that charges you exactly once"/>
        <section class="hero">
            <h1 tabindex="-1">"Small goods, charged exactly once"</h1>
            <p>"Double-click, reload, lose your connection: your order still happens once."</p>
        </section>
        <Suspense fallback=|| view! { <p class="loading">"Loading the catalog…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error" role="alert">"The catalog could not be loaded. Please try again."</p> }>
                {move || Suspend::new(async move {
                    let key = add_key.await?;
                    products.await.map(|list| view! {
                        <ul class="catalog">
                            {list.into_iter().map(|p| view! { <ProductCard product=p add_key=key.clone()/> }).collect_view()}
                        </ul>
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

/// One product, rendered on the server; only its "Add to cart" form hydrates.
#[component]
fn ProductCard(product: Product, add_key: String) -> impl IntoView {
    let Product {
        sku,
        name,
        description,
        price_cents,
        currency,
        stock,
    } = product;
    let in_stock = stock > 0;
    // The page's key made the card's own, so no two cards ever share an add key.
    let add_key = format!("{add_key}:{sku}");
    let card_sku = sku.clone();
    let initial = name.chars().next().unwrap_or('•').to_string();
    let stock_text = if in_stock {
        format!("{stock} in stock")
    } else {
        "Sold out".to_owned()
    };
    view! {
        <li class="product" data-sku=card_sku>
            <div class="product-art" aria-hidden="true">{initial}</div>
            <h2>{name.clone()}</h2>
            <p class="description">{description}</p>
            <p class="price">{format_money(price_cents, &currency)}</p>
            <p class="stock">{stock_text}</p>
            <AddToCartForm sku name in_stock add_key/>
        </li>
    }
}
