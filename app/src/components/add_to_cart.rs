use std::time::Duration;

use leptos::{prelude::*, server_fn::ServerFn};

use super::{cart_count::announce, live::mark_live, rest::Rest, stepper::QuantityStepper};
use crate::api::{shown_error, AddToCart};
use domain::MAX_QUANTITY;
use once_leptos::new_key;

/// A product's "Add to cart" form, the catalog's one live part. The form carries an add key:
/// the server adds once per key, so a double click before hydration (two native posts) adds
/// once. Once hydrated, the button is locked while an add is in flight, and a successful add
/// gives the form a new key, so the next click is a new add, once the button has rested
/// ([`ADDED_PAUSE`]) or the quantity has changed.
#[island]
pub fn AddToCartForm(sku: String, name: String, in_stock: bool, add_key: String) -> impl IntoView {
    let add = ServerAction::<AddToCart>::new();
    let quantity = RwSignal::new(1u32);
    let key = RwSignal::new(add_key.clone());
    // Once hydrated, a key made in this browser: a page restored from the cache, or a
    // duplicated tab, must not reuse a key that an earlier add used already.
    Effect::new(move |_| key.set(new_key()));
    let problem = RwSignal::new(None::<String>);
    let rest = Rest::new();
    // "Added to your cart" stays until the next add or a new quantity: long enough to read.
    let added = RwSignal::new(false);
    // A new quantity is a new add the shopper means: the rest ends at once.
    Effect::new(move |before: Option<u32>| {
        let now = quantity.get();
        if before.is_some_and(|before| before != now) {
            rest.end();
            added.set(false);
        }
        now
    });
    // The outcome of the add. Success ends the key: the next click is a new add. A failure
    // keeps it: the server may have added before the answer was lost, and the same key
    // makes a second click of the same add count once.
    Effect::new(move |_| match add.value().get() {
        Some(Ok(cart)) => {
            key.set(new_key());
            problem.set(None);
            announce(cart.item_count());
            added.set(true);
            rest.start(ADDED_PAUSE);
        }
        Some(Err(e)) => problem.set(Some(shown_error(&e))),
        None => {}
    });
    let on_submit = {
        let sku = sku.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            if !add.pending().get_untracked() && !rest.resting_now() && in_stock {
                added.set(false);
                add.dispatch(AddToCart {
                    sku: sku.clone(),
                    quantity: i64::from(quantity.get_untracked()),
                    add_key: key.get_untracked(),
                });
            }
        }
    };
    mark_live();
    view! {
        <form method="post" action=AddToCart::url() class="add-form" on:submit=on_submit>
            <input type="hidden" name="sku" value=sku/>
            <input type="hidden" name="add_key" value=add_key prop:value=move || key.get()/>
            <QuantityStepper label=name quantity max=MAX_QUANTITY/>
            <button
                type="submit"
                class="primary"
                class:resting=move || rest.resting()
                disabled=!in_stock
                aria-disabled=move || (add.pending().get() || rest.resting()).to_string()
            >
                "Add to cart"
            </button>
            <span class="added" role="status">{move || added.get().then_some("Added to your cart ✓")}</span>
        </form>
        {move || problem.get().map(|p| view! { <p class="error" role="alert">{p}</p> })}
    }
}

/// How long the button rests after a successful add. A fast shop answers the first click of
/// a double click before the second arrives, and the new key would make that second click a
/// new add; the lock while an add is in flight cannot see it. Any click in the rest (a double
/// click, a shaky one, a double tap, a key pressed twice) is the same add; a new quantity
/// ends the rest. Counted from the answer, so longer than a double click takes; short enough
/// that a shopper who means a second add waits for nothing they notice.
const ADDED_PAUSE: Duration = Duration::from_millis(1000);
