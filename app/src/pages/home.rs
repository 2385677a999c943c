use leptos::{prelude::*, server_fn::ServerFn};
use leptos_meta::Title;

use crate::{
    api::{fresh_key, list_products, AddToCart},
    components::stepper::QuantityStepper,
};
use domain::{format_money, Product, MAX_QUANTITY};
use once_leptos::new_key;

/// The catalog: rendered on the server, interactive once hydrated.
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

/// One product with its "Add to cart" form. The form carries an add key: the server adds
/// once per key, so a double click before hydration (two native posts) adds once. Once
/// hydrated, the button is locked while an add is in flight, and a successful add gives the
/// form a new key, so the next click is a new add.
#[component]
fn ProductCard(product: Product, add_key: String) -> impl IntoView {
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
    let quantity = RwSignal::new(1u32);
    // The page's key made the card's own, so no two cards ever share an add key.
    let add_key = format!("{add_key}:{sku}");
    let key = RwSignal::new(add_key.clone());
    // Once hydrated, a key made in this browser: a page restored from the cache, or a
    // duplicated tab, must not reuse a key that an earlier add used already.
    Effect::new(move |_| key.set(new_key()));
    let mine = RwSignal::new(false);
    let problem = RwSignal::new(None::<String>);
    // The outcome of this card's add. Success ends the key: the next click is a new add.
    // A failure keeps it: the server may have added before the answer was lost, and the
    // same key makes a second click of the same add count once.
    Effect::new(move |_| {
        let Some(result) = add.value().get() else {
            return;
        };
        if !mine.get_untracked() {
            return;
        }
        mine.set(false);
        match result {
            Ok(_) => {
                key.set(new_key());
                problem.set(None);
            }
            Err(e) => problem.set(Some(crate::api::shown_error(&e))),
        }
    });
    let on_submit = {
        let sku = sku.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            if !add.pending().get_untracked() && in_stock {
                mine.set(true);
                add.dispatch(AddToCart {
                    sku: sku.clone(),
                    quantity: i64::from(quantity.get_untracked()),
                    add_key: key.get_untracked(),
                });
            }
        }
    };
    let (card_sku, form_sku) = (sku.clone(), sku);
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
            <form method="post" action=AddToCart::url() class="add-form" on:submit=on_submit>
                <input type="hidden" name="sku" value=form_sku/>
                <input type="hidden" name="add_key" value=add_key prop:value=move || key.get()/>
                <QuantityStepper label=name quantity max=MAX_QUANTITY/>
                <button
                    type="submit"
                    class="primary"
                    disabled=!in_stock
                    aria-disabled=move || add.pending().get().to_string()
                >
                    "Add to cart"
                </button>
            </form>
            {move || problem.get().map(|p| view! { <p class="error" role="alert">{p}</p> })}
        </li>
    }
}
