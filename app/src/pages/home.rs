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
    let Product {
        sku,
        name,
        description,
        price_cents,
        currency,
        stock,
    } = product;
    let in_stock = stock > 0;
    let initial = name.chars().next().unwrap_or('•').to_string();
    // The form's children are a closure of their own, so it gets its own copies.
    let (form_sku, form_name) = (sku.clone(), name.clone());
    let stock_text = if in_stock {
        format!("{stock} in stock")
    } else {
        "Sold out".to_owned()
    };
    view! {
        <li class="product" data-sku=sku>
            <div class="product-art" aria-hidden="true">{initial}</div>
            <h2>{name}</h2>
            <p class="description">{description}</p>
            <p class="price">{format_money(price_cents, &currency)}</p>
            <p class="stock">{stock_text}</p>
            <ActionForm action=add attr:class="add-form">
                <input type="hidden" name="sku" value=form_sku/>
                <QuantityStepper label=form_name.clone() max=99/>
                <button type="submit" class="primary" disabled=!in_stock>"Add to cart"</button>
            </ActionForm>
        </li>
    }
}
