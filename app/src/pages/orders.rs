use leptos::prelude::*;
use leptos_meta::Title;

use domain::{format_money, format_time};

use crate::api::list_orders;

/// The shopper's orders, newest first.
#[component]
pub fn OrdersPage() -> impl IntoView {
    let orders = Resource::new(|| (), |_| list_orders());
    view! {
        <Title text="My orders · Once"/>
        <h1 tabindex="-1">"My orders"</h1>
        <Suspense fallback=|| view! { <p class="loading">"Loading your orders…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error" role="alert">"Your orders could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move {
                    orders.await.map(|list| {
                        if list.is_empty() {
                            return view! { <p class="empty">"No orders yet."</p> }.into_any();
                        }
                        view! {
                            <ul class="order-list">
                                {list.into_iter().map(|o| view! {
                                    <li>
                                        <a href=format!("/orders/{}", o.id)>{o.order_no}</a>
                                        <time datetime=o.created_at.clone()>{format_time(&o.created_at)}</time>
                                        <span class="status">{o.status.label()}</span>
                                        <span>{format_money(o.total_cents, &o.currency)}</span>
                                    </li>
                                }).collect_view()}
                            </ul>
                        }
                        .into_any()
                    })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}
