//! The order page's payment form: a card number posted to the shop (the sandbox), or a card
//! taken by Stripe.js in the browser, of which the shop receives only the PaymentMethod's id
//! (docs/payments.md, "Going live with Stripe").

use leptos::prelude::*;
use uuid::Uuid;

use super::{
    bank::{BankStep, BankStepView},
    follow, Live,
};
use crate::components::status_line::StatusLine;
use domain::CardEntry;
use once_leptos::{use_submit_once, KeyOwner, Messages, Options, Problem};

/// The card the payment form starts with: the sandbox's "always succeeds" test card.
const TEST_CARD: &str = "4242424242424242";

/// The payment form, driven by the same submit-once hook as the checkout. The tab keeps the
/// payment's key until the intent ends, so a reload or a duplicated tab continues the same
/// payment. Once the charge is accepted, the page asks for the order's status until the
/// payment has settled (by the charge's answer or the provider's callback).
#[component]
pub(super) fn PayForm(
    order_id: Uuid,
    pay_key: String,
    key_retention_secs: u64,
    card_entry: CardEntry,
    awaiting_bank: Option<Uuid>,
    live: Live,
) -> impl IntoView {
    let bank = BankStep::new(awaiting_bank);
    let card = RwSignal::new(TEST_CARD.to_owned());
    let stripe_key = match &card_entry {
        CardEntry::StripeJs {
            publishable_key, ..
        } => Some(publishable_key.clone()),
        CardEntry::CardNumber => None,
    };
    let by_stripe = stripe_key.is_some();
    // Stripe.js's answer is awaited before the payment is sent: a second click meanwhile
    // must not ask for a second payment method.
    let tokenising = RwSignal::new(false);
    let card_error = RwSignal::new(None::<String>);
    // The body sent under a key: clicking again under the same key (after a lost answer)
    // sends it again, never a new payment method the key was not used with.
    let sent = StoredValue::new(None::<(String, String)>);
    // Paying needs the hook (there is no form post for payments): enabled once hydrated.
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    let mut options = Options::new(format!("pay:{order_id}"), pay_key, KeyOwner::Tab);
    options.policy.resume_within_ms = key_retention_secs as f64 * 1000.0;
    // A card number never lingers in the browser: after a reload the page follows the
    // order instead of sending the payment again.
    options.remember_body = false;
    options.messages = Messages {
        sending: "Paying…",
        resuming: "Finishing your payment…",
        resuming_earlier: "Finishing your payment…",
        still_running:
            "Your payment is still being processed. This page shows the result when it is done.",
        ..Messages::default()
    };
    let submit = use_submit_once(
        options,
        move |payment: serde_json::Value, _| match awaits_bank(&payment) {
            Some(payment_id) => bank.start(order_id, payment_id, live),
            None => leptos::task::spawn_local(follow(order_id, live)),
        },
        move |problem: Problem, _| {
            // Another tab's payment, or the order settled meanwhile: show what it becomes.
            if matches!(
                problem.name.as_str(),
                "payment-in-progress" | "order-not-payable" | "idempotency-key-reused"
            ) {
                leptos::task::spawn_local(follow(order_id, live));
            }
        },
    )
    .on_resumed(move |_| leptos::task::spawn_local(follow(order_id, live)));
    let url = format!("/api/orders/{order_id}/payments");
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if !by_stripe {
            let body = serde_json::json!({ "card_number": card.get_untracked() }).to_string();
            submit.submit(&url, body);
            return;
        }
        if tokenising.get_untracked() || submit.busy.get_untracked() {
            return;
        }
        let key = submit.key.get_untracked();
        if let Some((_, body)) = sent.get_value().filter(|(k, _)| *k == key) {
            submit.submit(&url, body);
            return;
        }
        tokenising.set(true);
        card_error.set(None);
        let url = url.clone();
        leptos::task::spawn_local(async move {
            let made = stripe_payment_method().await;
            // The form is gone (the order was cancelled meanwhile): nothing to send.
            if tokenising.try_set(false).is_some() {
                return;
            }
            match made {
                Ok(method) => {
                    let body = serde_json::json!({ "payment_method": method }).to_string();
                    sent.set_value(Some((key, body.clone())));
                    submit.submit(&url, body);
                }
                Err(why) => card_error.set(Some(why)),
            }
        });
    };
    let card_field = match stripe_key {
        Some(key) => view! {
            <div class="card-field">
                <span class="label">"Card"</span>
                <div id="card-element" data-key=key data-testid="card-element"></div>
                <noscript>
                    <p class="error">
                        "Paying by card needs JavaScript here: the card goes from your browser straight to Stripe, never through this shop."
                    </p>
                </noscript>
            </div>
        }
        .into_any(),
        None => view! {
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
        }
        .into_any(),
    };
    view! {
        <form class="pay-form" on:submit=on_submit>
            {card_field}
            <button
                type="submit"
                class="primary"
                disabled=move || !ready.get()
                aria-disabled=move || (submit.busy.get() || tokenising.get()).to_string()
            >
                "Pay"
            </button>
        </form>
        <StatusLine status=submit.status testid="pay-status"/>
        <BankStepView step=bank order_id live/>
        {move || card_error.get().map(|why| view! {
            <p class="error" role="alert" data-testid="card-error">{why}</p>
        })}
    }
}

/// The payment method Stripe.js makes of the card typed into its field, through the
/// page's `card-entry.js` (`window.onceCardPaymentMethod`); what to show when it cannot.
async fn stripe_payment_method() -> Result<String, String> {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let not_loaded = || "The card field has not loaded yet; please try again.".to_owned();
        let window = web_sys::window().ok_or_else(not_loaded)?;
        let make = js_sys::Reflect::get(&window, &"onceCardPaymentMethod".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .ok_or_else(not_loaded)?;
        let promise = make
            .call0(&window)
            .ok()
            .and_then(|p| p.dyn_into::<js_sys::Promise>().ok())
            .ok_or_else(not_loaded)?;
        match wasm_bindgen_futures::JsFuture::from(promise).await {
            Ok(method) => method.as_string().ok_or_else(not_loaded),
            Err(error) => Err(js_sys::Reflect::get(&error, &"message".into())
                .ok()
                .and_then(|m| m.as_string())
                .unwrap_or_else(|| "The card was not accepted; please check it.".to_owned())),
        }
    }
    #[cfg(not(feature = "hydrate"))]
    Err("Paying by card needs the page's scripts.".to_owned())
}

/// The payment the bank must confirm, when the payment's answer says so (202 with
/// `needs_authentication`).
fn awaits_bank(payment: &serde_json::Value) -> Option<Uuid> {
    if payment["needs_authentication"] != true {
        return None;
    }
    payment["id"]
        .as_str()
        .and_then(|id| Uuid::parse_str(id).ok())
}
