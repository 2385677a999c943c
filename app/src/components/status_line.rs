use leptos::prelude::*;

use once_leptos::{Problem, Status};

use domain::Order;

/// What the submit-once hook is doing, in a live region: progress looks like progress, a
/// refusal looks like an error (and is announced at once).
#[component]
pub fn StatusLine(status: RwSignal<Option<Status>>, testid: &'static str) -> impl IntoView {
    view! {
        <div class="status-line" role="status" aria-live="polite" data-testid=testid>
            {move || status.get().map(|s| if s.is_problem() {
                view! { <p class="error" role="alert">{s.text().to_owned()}</p> }.into_any()
            } else {
                view! { <p class="progress"><span class="spinner" aria-hidden="true"></span>{s.text().to_owned()}</p> }.into_any()
            })}
        </div>
    }
}

/// What became of an order an earlier page submitted, shown beside the current cart.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    text: String,
    order: Option<(String, String)>,
}

impl Notice {
    pub fn placed(order: &Order) -> Self {
        Self {
            text: "Your earlier order was placed:".into(),
            order: Some((format!("/orders/{}", order.id), order.order_no.clone())),
        }
    }

    pub fn not_placed(problem: &Problem) -> Self {
        let text = if problem.name == "cart-changed" {
            "Your earlier order was not placed. Your cart is shown as it is now.".to_owned()
        } else {
            format!("Your earlier order was not placed: {}", problem.detail)
        };
        Self { text, order: None }
    }

    pub fn view(self) -> impl IntoView {
        view! {
            <p class="notice" role="status" data-testid="earlier-order">
                {self.text} " "
                {self.order.map(|(href, no)| view! { <a href=href>{no}</a> })}
            </p>
        }
    }
}
