use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use uuid::Uuid;

use crate::{
    api::{get_order, get_order_progress},
    dto::{format_money, Fulfillment, Order, OrderPage as OrderPageData, OrderStatus},
    submit_once::{pause, use_submit_once},
};

/// The card the payment form starts with: the sandbox's "always succeeds" test card.
const TEST_CARD: &str = "4242424242424242";
/// How long the page keeps asking whether a payment has settled and the order shipped.
const PROGRESS_POLLS: u32 = 90;

/// One order: its number, its status, its lines, and while it awaits payment, a way to pay.
#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let page = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        get_order,
    );
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the order…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error">"The order could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move {
                    page.await.map(|found| match found {
                        Some(page) => view! { <OrderDetails page/> }.into_any(),
                        None => view! { <p class="empty">"There is no such order."</p> }.into_any(),
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

#[component]
fn OrderDetails(page: OrderPageData) -> impl IntoView {
    let OrderPageData { order, pay_key } = page;
    let Order {
        id,
        order_no,
        status,
        currency,
        total_cents,
        items,
        fulfillment,
        ..
    } = order;
    let status = RwSignal::new(status);
    let fulfillment = RwSignal::new(fulfillment);
    let awaiting_payment = move || status.get() == OrderStatus::PendingPayment;
    // A paid order is about to be fulfilled: follow it (in the browser only).
    Effect::new(move |_| {
        if status.get_untracked() == OrderStatus::Paid && fulfillment.get_untracked().is_none() {
            leptos::task::spawn_local(follow(id, status, fulfillment));
        }
    });
    view! {
        <div class="panel order">
            <h1>"Order " <span data-testid="order-no">{order_no}</span></h1>
            <p><span class="status" data-testid="order-status">{move || status.get().label()}</span></p>
            <table class="lines">
                <thead><tr><th>"Item"</th><th class="num">"Qty"</th><th class="num">"Price"</th></tr></thead>
                <tbody>
                    {items.into_iter().map(|i| {
                        let line = format_money(i.unit_price_cents * i64::from(i.quantity), &currency);
                        view! { <tr><td>{i.name}</td><td class="num">{i.quantity}</td><td class="num">{line}</td></tr> }
                    }).collect_view()}
                </tbody>
                <tfoot><tr><th>"Total"</th><th></th><th class="num">{format_money(total_cents, &currency)}</th></tr></tfoot>
            </table>
            <Show when=awaiting_payment>
                <PayForm order_id=id pay_key=pay_key.clone() status fulfillment/>
            </Show>
            {move || fulfillment.get().map(|f| view! { <FulfillmentPanel fulfillment=f/> })}
            <a href="/orders">"All my orders"</a>
        </div>
    }
}

/// The payment form, driven by the same submit-once hook as the checkout. Once the charge
/// is accepted, the page asks for the order's status until the payment has settled (by the
/// charge's answer or the provider's callback, whichever lands first).
#[component]
fn PayForm(
    order_id: Uuid,
    pay_key: String,
    status: RwSignal<OrderStatus>,
    fulfillment: RwSignal<Option<Fulfillment>>,
) -> impl IntoView {
    let card = RwSignal::new(TEST_CARD.to_owned());
    let submit = use_submit_once(format!("pay:{order_id}"), pay_key, move |_payment| {
        leptos::task::spawn_local(follow(order_id, status, fulfillment));
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let body = serde_json::json!({ "card_number": card.get_untracked() }).to_string();
        submit.submit(&format!("/api/orders/{order_id}/payments"), body);
    };
    view! {
        <form class="pay-form" on:submit=on_submit>
            <label>
                "Card number"
                <input
                    name="card_number"
                    inputmode="numeric"
                    autocomplete="cc-number"
                    value=TEST_CARD
                    prop:value=move || card.get()
                    on:input=move |ev| card.set(event_target_value(&ev))
                />
            </label>
            <button type="submit" class="primary" disabled=move || submit.busy.get()>"Pay"</button>
        </form>
        <p class="progress" role="status" data-testid="pay-status">{move || submit.message.get()}</p>
    }
}

/// What became of a paid order: its shipment number and confirmation email, or a backorder.
#[component]
fn FulfillmentPanel(fulfillment: Fulfillment) -> impl IntoView {
    let Fulfillment {
        status,
        shipment_no,
        email_url,
    } = fulfillment;
    if status == "backordered" {
        return view! {
            <p class="fulfillment backordered" data-testid="fulfillment">
                "Backordered: some items ran out of stock. We will ship as soon as they are back."
            </p>
        }
        .into_any();
    }
    view! {
        <div class="fulfillment" data-testid="fulfillment">
            <p>"Shipped as " <strong data-testid="shipment-no">{shipment_no}</strong></p>
            {email_url.map(|href| view! {
                <p><a href=href target="_blank" data-testid="email-link">"View the confirmation email"</a></p>
            })}
        </div>
    }
    .into_any()
}

/// Asks for the order until its payment has settled and fulfillment has run (or the page
/// gives up; a reload shows the latest either way).
async fn follow(
    order_id: Uuid,
    status: RwSignal<OrderStatus>,
    fulfillment: RwSignal<Option<Fulfillment>>,
) {
    for _ in 0..PROGRESS_POLLS {
        if let Ok(Some(now)) = get_order_progress(order_id.to_string()).await {
            status.set(now.status);
            let done = match &now.fulfillment {
                Some(f) => f.status == "backordered" || f.email_url.is_some(),
                None => now.status == OrderStatus::Cancelled,
            };
            fulfillment.set(now.fulfillment);
            if done {
                return;
            }
        }
        pause(1000).await;
    }
}
