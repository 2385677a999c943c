use leptos::prelude::*;

use domain::{format_money, Cart, CartLine, MAX_QUANTITY};

use crate::api::{shown_error, SetCartQuantity};

/// The cart's lines, each with its quantity to change and a way to remove it. The forms work
/// before hydration too (they post to the server function, which sends the shopper back).
/// `locked` while an order is being placed: the cart must not change under it.
#[component]
pub fn CartLines(cart: Cart, locked: RwSignal<bool>) -> impl IntoView {
    let currency = cart
        .lines
        .first()
        .map(|l| l.currency.clone())
        .unwrap_or_default();
    let total = format_money(cart.total_cents(), &currency);
    let edit = expect_context::<ServerAction<SetCartQuantity>>();
    let refused = move || {
        edit.value()
            .get()
            .and_then(Result::err)
            .map(|e| shown_error(&e))
    };
    view! {
        {move || refused().map(|text| view! { <p class="error" role="alert">{text}</p> })}
        <table class="lines">
            <thead><tr><th>"Item"</th><th class="num">"Qty"</th><th class="num">"Price"</th><th><span class="visually-hidden">"Actions"</span></th></tr></thead>
            <tbody>
                {cart.lines.into_iter().map(|line| view! { <LineRow line locked/> }).collect_view()}
            </tbody>
            <tfoot><tr><th>"Total"</th><th></th><th class="num" data-testid="cart-total">{total}</th><th></th></tr></tfoot>
        </table>
    }
}

#[component]
fn LineRow(line: CartLine, locked: RwSignal<bool>) -> impl IntoView {
    let edit = expect_context::<ServerAction<SetCartQuantity>>();
    let busy = move || locked.get() || edit.pending().get();
    let CartLine {
        sku,
        name,
        quantity,
        unit_price_cents,
        currency,
        in_stock,
    } = line;
    let price = format_money(unit_price_cents * i64::from(quantity), &currency);
    let short = (quantity > in_stock).then(|| match in_stock {
        0 => "Sold out: please remove it.".to_owned(),
        n => format!("Only {n} in stock: please lower the quantity."),
    });
    let (update_sku, remove_sku, typed_sku) = (sku.clone(), sku.clone(), sku.clone());
    // Once hydrated, a typed quantity applies as soon as the field is left (the Update
    // button stays for pages without wasm), so the order never differs from what is shown.
    let apply_typed = move |ev: leptos::ev::Event| {
        if let Ok(quantity) = event_target_value(&ev).trim().parse::<i64>() {
            edit.dispatch(SetCartQuantity {
                sku: typed_sku.clone(),
                quantity,
            });
        }
    };
    let (qty_label, remove_label) = (format!("Quantity of {name}"), format!("Remove {name}"));
    view! {
        <tr data-sku=sku>
            <td>{name} {short.map(|s| view! { <span class="warning">{s}</span> })}</td>
            <td class="num">
                <ActionForm action=edit attr:class="qty-form">
                    <input type="hidden" name="sku" value=update_sku/>
                    <input
                        type="number"
                        name="quantity"
                        min="1"
                        max=MAX_QUANTITY
                        value=quantity
                        on:change=apply_typed
                        aria-label=qty_label
                    />
                    <button type="submit" disabled=busy>"Update"</button>
                </ActionForm>
            </td>
            <td class="num">{price}</td>
            <td>
                <ActionForm action=edit>
                    <input type="hidden" name="sku" value=remove_sku/>
                    <input type="hidden" name="quantity" value="0"/>
                    <button type="submit" class="link" disabled=busy aria-label=remove_label>"Remove"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
