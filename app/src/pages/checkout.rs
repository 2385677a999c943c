use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};

use crate::{
    api::get_checkout,
    dto::{format_money, Cart, Checkout},
    query,
    submit_once::{reload_to, use_submit_once, SubmitOnce},
};

/// The cart and the checkout form. Without wasm the form posts to `/checkout` (and the
/// server redirects to the order); once hydrated, [`use_submit_once`] owns the submit and
/// posts to `/api/checkout`. Both carry the cart's checkout key.
#[component]
pub fn CheckoutPage() -> impl IntoView {
    let checkout = Resource::new(|| (), |_| get_checkout());
    let problem = move || use_query_map().read().get("problem");
    view! {
        <h1>"Your cart"</h1>
        {move || problem().map(|p| view! { <p class="error" role="alert">{p}</p> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading your cart…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error">"Your cart could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move { checkout.await.map(|c| view! { <CheckoutForm checkout=c/> }) })}
            </ErrorBoundary>
        </Suspense>
    }
}

#[component]
fn CheckoutForm(checkout: Checkout) -> impl IntoView {
    let navigate = use_navigate();
    let submit = use_submit_once("checkout", checkout.key.clone(), move |order| {
        let id = order["id"].as_str().unwrap_or_default().to_owned();
        // The order's own transaction emptied the cart on the server.
        navigate(&format!("/orders/{id}"), Default::default());
    })
    // A refusal (out of stock, or the cart changed in another tab) ended the intent on the
    // server, which gave the cart a new key: load the page afresh, so the cart, its key and
    // the reason are shown together, exactly as after the no-wasm form.
    .with_on_refused(|reason| {
        reload_to(&format!("/checkout?problem={}", query::encode(&reason)));
    });
    let Checkout { cart, key } = checkout;
    if cart.lines.is_empty() {
        return view! {
            <div class="panel">
                <p class="empty">"Your cart is empty."</p>
                <a href="/">"Browse the shop"</a>
                <Progress submit/>
            </div>
        }
        .into_any();
    }
    // The server builds the order from the cart it holds, under the cart's key: a page
    // showing an older cart cannot order it (see `POST /api/checkout`).
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        submit.submit("/api/checkout", "{}".to_owned());
    };
    view! {
        <div class="panel">
            <CartLines cart/>
            <form method="post" action="/checkout" on:submit=on_submit class="checkout-form">
                <input type="hidden" name="idempotency_key" value=key prop:value=move || submit.key.get()/>
                <button type="submit" class="primary" disabled=move || submit.busy.get()>"Place order"</button>
            </form>
            <Progress submit/>
        </div>
    }
    .into_any()
}

/// What the hook is doing: progress while in flight, or why the shop refused.
#[component]
fn Progress(submit: SubmitOnce) -> impl IntoView {
    view! {
        <p class="progress" role="status" data-testid="submit-status">
            {move || submit.message.get()}
        </p>
    }
}

#[component]
fn CartLines(cart: Cart) -> impl IntoView {
    let currency = cart
        .lines
        .first()
        .map(|l| l.currency.clone())
        .unwrap_or_default();
    let total = format_money(cart.total_cents(), &currency);
    view! {
        <table class="lines">
            <thead><tr><th>"Item"</th><th class="num">"Qty"</th><th class="num">"Price"</th></tr></thead>
            <tbody>
                {cart.lines.into_iter().map(|l| view! {
                    <tr>
                        <td>{l.name}</td>
                        <td class="num">{l.quantity}</td>
                        <td class="num">{format_money(l.unit_price_cents * i64::from(l.quantity), &l.currency)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
            <tfoot><tr><th>"Total"</th><th></th><th class="num">{total}</th></tr></tfoot>
        </table>
    }
}
