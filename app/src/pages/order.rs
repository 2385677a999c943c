use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::{
    api::get_order,
    dto::{format_money, Order},
};

/// One order: its number, its status, its lines.
#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let order = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        get_order,
    );
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the order…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error">"The order could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move {
                    order.await.map(|found| match found {
                        Some(order) => view! { <OrderDetails order/> }.into_any(),
                        None => view! { <p class="empty">"There is no such order."</p> }.into_any(),
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

#[component]
fn OrderDetails(order: Order) -> impl IntoView {
    let Order {
        order_no,
        status,
        currency,
        total_cents,
        items,
        ..
    } = order;
    view! {
        <div class="panel order">
            <h1>"Order " <span data-testid="order-no">{order_no}</span></h1>
            <p><span class="status" data-testid="order-status">{status.label()}</span></p>
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
            <a href="/orders">"All my orders"</a>
        </div>
    }
}
