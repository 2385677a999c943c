use leptos::prelude::*;

use crate::{
    api::{list_products, AddToCart},
    components::stepper::QuantityStepper,
    dto::{format_money, Product},
};

/// The catalog: rendered on the server, interactive once hydrated.
#[component]
pub fn HomePage() -> impl IntoView {
    let products = Resource::new(|| (), |_| list_products());
    view! {
        <section class="hero">
            <h1>"Small goods, charged exactly once"</h1>
            <p>"Double-click, reload, lose your connection: your order still happens once."</p>
        </section>
        <Suspense fallback=|| view! { <p class="loading">"Loading the catalog…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error">"The catalog could not be loaded. Please try again."</p> }>
                {move || Suspend::new(async move {
                    products.await.map(|list| view! {
                        <ul class="catalog">
                            {list.into_iter().map(|p| view! { <ProductCard product=p/> }).collect_view()}
                        </ul>
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

#[component]
fn ProductCard(product: Product) -> impl IntoView {
    let add = expect_context::<ServerAction<AddToCart>>();
    let in_stock = product.stock > 0;
    view! {
        <li class="product" data-sku=product.sku.clone()>
            <div class="product-art" aria-hidden="true">{product.name.chars().next().unwrap_or('•').to_string()}</div>
            <h2>{product.name.clone()}</h2>
            <p class="description">{product.description.clone()}</p>
            <p class="price">{format_money(product.price_cents, &product.currency)}</p>
            <p class="stock">{if in_stock { format!("{} in stock", product.stock) } else { "Sold out".to_owned() }}</p>
            <ActionForm action=add attr:class="add-form">
                <input type="hidden" name="sku" value=product.sku.clone()/>
                <QuantityStepper label=product.name.clone() max=99/>
                <button type="submit" class="primary" disabled=!in_stock>"Add to cart"</button>
            </ActionForm>
        </li>
    }
}
