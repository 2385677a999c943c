use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use uuid::Uuid;

use crate::{
    api::{get_order, get_order_progress},
    components::{live::mark_live, preload::PreloadLazyIsland, status_line::StatusLine},
};
use domain::{
    details::ShippingAddress, format_money, format_time, CardEntry, Fulfillment, Order,
    OrderPage as OrderPageData, OrderStatus, StatusChange,
};
use once_leptos::{pause, use_submit_once, KeyOwner, Messages, Options, Problem};

mod bank;
mod pay;
use pay::PayForm;

/// How long the page keeps asking whether a payment has settled and the order shipped.
const PROGRESS_POLLS: u32 = 90;

/// One order: its number, dates, lines, total and status history; while it awaits payment,
/// a way to pay; once fulfilled, its shipment.
#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let page = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        get_order,
    );
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the order…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error" role="alert">"The order could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move {
                    page.await.map(|found| match found {
                        Some(page) => view! { <OrderDetails page/> }.into_any(),
                        None => view! {
                            <Title text="No such order · Once"/>
                            <h1 tabindex="-1">"There is no such order"</h1>
                            <p><a href="/orders">"See all your orders"</a></p>
                        }.into_any(),
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

#[component]
fn OrderDetails(page: OrderPageData) -> impl IntoView {
    let OrderPageData {
        order,
        pay_key,
        cancel_key,
        key_retention_secs,
        card_entry,
        awaiting_bank,
    } = page;
    let Order {
        id,
        order_no,
        status,
        currency,
        total_cents,
        items,
        fulfillment,
        created_at,
        history,
        email,
        shipping_address,
    } = order;
    let payable = status == OrderStatus::PendingPayment;
    // Stripe.js, and the page's script that mounts its card field once both are there;
    // neither holds the page up while it loads.
    let card_scripts = match (&card_entry, payable) {
        (CardEntry::StripeJs { js_url, .. }, true) => Some(view! {
            <script src=js_url.clone() async></script>
            <script src="/card-entry.js" defer></script>
        }),
        _ => None,
    };
    let pay = payable.then_some(Payable {
        pay_key,
        cancel_key,
        key_retention_secs,
        card_entry,
        awaiting_bank,
    });
    view! {
        <Title text=format!("Order {order_no} · Once")/>
        <PreloadLazyIsland island="order_live_loader_"/>
        <div class="panel order">
            <h1 tabindex="-1">"Order " <span data-testid="order-no">{order_no.clone()}</span></h1>
            <p class="meta">"Placed " <time datetime=created_at.clone()>{format_time(&created_at)}</time></p>
            <OrderLive order_id=id status fulfillment history pay>
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
            </OrderLive>
            {card_scripts}
            <Recipient email shipping_address/>
            <a href="/orders">"All my orders"</a>
        </div>
    }
}

/// Who the order is for and where it goes; said plainly once the shop has forgotten them.
#[component]
fn Recipient(email: Option<String>, shipping_address: Option<ShippingAddress>) -> impl IntoView {
    let (Some(email), Some(address)) = (email, shipping_address) else {
        return view! {
            <p class="meta" data-testid="order-recipient">"No shipping details are kept for this order."</p>
        }
        .into_any();
    };
    let lines = address
        .lines()
        .into_iter()
        .map(|line| view! { <span class="address-line">{line}</span> })
        .collect_view();
    view! {
        <section class="recipient" data-testid="order-recipient" aria-labelledby="recipient-heading">
            <h2 id="recipient-heading">"Shipping to"</h2>
            <address data-testid="order-ship-to">{lines}</address>
            <p class="meta">"Confirmation to " <span data-testid="order-email">{email}</span></p>
        </section>
    }
    .into_any()
}

/// What paying or cancelling needs: the tab's first key for each and how long the server
/// keeps keys.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Payable {
    pay_key: String,
    cancel_key: String,
    key_retention_secs: u64,
    card_entry: CardEntry,
    awaiting_bank: Option<Uuid>,
}

/// The order as it is now: polled while its payment settles and fulfillment runs.
#[derive(Clone, Copy)]
struct Live {
    status: RwSignal<OrderStatus>,
    fulfillment: RwSignal<Option<Fulfillment>>,
    history: RwSignal<Vec<StatusChange>>,
}

/// The order page's island: its status, the payment form while it awaits payment, its
/// shipment and its history, which change as the payment settles. The lines between
/// (`children`) stay server-rendered.
#[island(lazy)]
fn OrderLive(
    order_id: Uuid,
    status: OrderStatus,
    fulfillment: Option<Fulfillment>,
    history: Vec<StatusChange>,
    pay: Option<Payable>,
    children: Children,
) -> impl IntoView {
    let live = Live {
        status: RwSignal::new(status),
        fulfillment: RwSignal::new(fulfillment),
        history: RwSignal::new(history),
    };
    let awaiting_payment = move || live.status.get() == OrderStatus::PendingPayment;
    // A paid order is about to be fulfilled: follow it (in the browser only).
    Effect::new(move |_| {
        if live.status.get_untracked() == OrderStatus::Paid
            && live.fulfillment.get_untracked().is_none()
        {
            leptos::task::spawn_local(follow(order_id, live));
        }
    });
    mark_live();
    view! {
        <p>
            <span class="status" role="status" aria-live="polite" data-testid="order-status">
                {move || live.status.get().label()}
            </span>
        </p>
        {children()}
        {pay.map(|Payable { pay_key, cancel_key, key_retention_secs, card_entry, awaiting_bank }| view! {
            <Show when=awaiting_payment>
                <PayForm order_id pay_key=pay_key.clone() key_retention_secs card_entry=card_entry.clone() awaiting_bank live/>
                <CancelForm order_id cancel_key=cancel_key.clone() key_retention_secs live/>
            </Show>
        })}
        {move || live.fulfillment.get().map(|f| view! { <FulfillmentPanel fulfillment=f/> })}
        <History history=live.history/>
    }
}

/// Every status the order has had, oldest first.
#[component]
fn History(history: RwSignal<Vec<StatusChange>>) -> impl IntoView {
    view! {
        <h2>"History"</h2>
        <ol class="history" data-testid="history">
            <For each=move || history.get() key=|c| (c.status, c.at.clone()) let(change)>
                <li>
                    <time datetime=change.at.clone()>{format_time(&change.at)}</time>
                    " " {change.status.label()}
                </li>
            </For>
        </ol>
    }
}

/// Cancelling the order while it waits for payment, once per key like paying: a double
/// click or a second tab cancels it once. A cancel that comes too late (the order was paid
/// meanwhile, or a payment is under way) shows what the order becomes.
#[component]
fn CancelForm(
    order_id: Uuid,
    cancel_key: String,
    key_retention_secs: u64,
    live: Live,
) -> impl IntoView {
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    let mut options = Options::new(format!("cancel:{order_id}"), cancel_key, KeyOwner::Tab);
    options.policy.resume_within_ms = key_retention_secs as f64 * 1000.0;
    options.messages = Messages {
        sending: "Cancelling…",
        resuming: "Finishing the cancel…",
        resuming_earlier: "Finishing the cancel…",
        ..Messages::default()
    };
    let submit = use_submit_once(
        options,
        move |_order: serde_json::Value, _| leptos::task::spawn_local(follow(order_id, live)),
        move |problem: Problem, _| {
            if matches!(
                problem.name.as_str(),
                "payment-in-progress" | "order-not-cancellable"
            ) {
                leptos::task::spawn_local(follow(order_id, live));
            }
        },
    )
    .on_resumed(move |_| leptos::task::spawn_local(follow(order_id, live)));
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        submit.submit(&format!("/api/orders/{order_id}/cancel"), String::new());
    };
    view! {
        <form class="cancel-form" on:submit=on_submit>
            <button
                type="submit"
                class="secondary"
                data-testid="cancel-order"
                disabled=move || !ready.get()
                aria-disabled=move || submit.busy.get().to_string()
            >
                "Cancel order"
            </button>
        </form>
        <StatusLine status=submit.status testid="cancel-status"/>
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
async fn follow(order_id: Uuid, live: Live) {
    for _ in 0..PROGRESS_POLLS {
        if let Ok(Some(now)) = get_order_progress(order_id.to_string()).await {
            let done = match &now.fulfillment {
                Some(f) => f.status == "backordered" || f.email_url.is_some(),
                None => now.status == OrderStatus::Cancelled,
            };
            // The page may be gone (the shopper moved on): then there is nothing to show.
            if live.status.try_set(now.status).is_some() {
                return;
            }
            live.fulfillment.try_set(now.fulfillment);
            live.history.try_set(now.history);
            if done {
                return;
            }
        }
        pause(1000).await;
    }
}
