//! The shopper's bank step (3-D Secure, with Stripe; docs/payments.md, "3-D Secure"). A
//! payment the bank must confirm is answered 202 and left pending; the page hands the step
//! to Stripe.js (`card-entry.js`, `window.onceBankStep`), which asks the shop for what the
//! step needs, runs it, and asks the shop for the outcome the shop reads from Stripe. After
//! a reload the page offers the step again; without scripts it says what it needs.

use leptos::prelude::*;
use uuid::Uuid;

use super::{follow, Live};

/// A payment waiting for the shopper's bank, and what the page says of it.
#[derive(Clone, Copy)]
pub(super) struct BankStep {
    /// The attempt the bank must confirm; `None` once it has an outcome.
    waiting: RwSignal<Option<Uuid>>,
    running: RwSignal<bool>,
    said: RwSignal<Option<Said>>,
}

#[derive(Clone)]
enum Said {
    Progress(&'static str),
    Problem(String),
}

const ASKING: &str = "Your bank asks you to confirm this payment…";
const COULD_NOT_FINISH: &str =
    "The step with your bank could not be finished. Nothing more was charged; please continue.";

impl BankStep {
    pub(super) fn new(waiting: Option<Uuid>) -> Self {
        Self {
            waiting: RwSignal::new(waiting),
            running: RwSignal::new(false),
            said: RwSignal::new(None),
        }
    }

    /// Runs the step for `payment_id` (the payment's answer said the bank must confirm it).
    pub(super) fn start(self, order_id: Uuid, payment_id: Uuid, live: Live) {
        self.waiting.set(Some(payment_id));
        self.resume(order_id, live);
    }

    /// Runs the step for the waiting payment, once at a time, and shows its outcome.
    fn resume(self, order_id: Uuid, live: Live) {
        let Some(payment_id) = self.waiting.get_untracked() else {
            return;
        };
        if self.running.get_untracked() {
            return;
        }
        self.running.set(true);
        self.said.set(Some(Said::Progress(ASKING)));
        leptos::task::spawn_local(async move {
            let answer = run_with_stripe_js(order_id, payment_id).await;
            // The page is gone (the shopper moved on): nothing to show.
            if self.running.try_set(false).is_some() {
                return;
            }
            self.show(answer, order_id, live);
        });
    }

    fn show(self, answer: Result<(u16, serde_json::Value), ()>, order_id: Uuid, live: Live) {
        let follow_order = || leptos::task::spawn_local(follow(order_id, live));
        match answer {
            // The bank still waits (the step did not run to its end): offered again.
            Ok((202, body)) if body["client_secret"].is_string() => {
                self.said
                    .set(Some(Said::Problem(COULD_NOT_FINISH.to_owned())));
            }
            // Paid; or waiting for the provider now, not the shopper; or settled meanwhile.
            Ok((201 | 202 | 404, _)) => {
                self.waiting.set(None);
                self.said.set(None);
                follow_order();
            }
            // The bank refused, or the payment stopped: the shopper may pay again.
            Ok((402 | 422, body)) => {
                self.waiting.set(None);
                let detail = body["detail"].as_str().unwrap_or(COULD_NOT_FINISH);
                self.said.set(Some(Said::Problem(detail.to_owned())));
            }
            _ => self
                .said
                .set(Some(Said::Problem(COULD_NOT_FINISH.to_owned()))),
        }
    }
}

/// What the page shows of the step: progress, a refusal, or a button to continue it.
#[component]
pub(super) fn BankStepView(step: BankStep, order_id: Uuid, live: Live) -> impl IntoView {
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    let offer = move || step.waiting.get().is_some() && !step.running.get();
    view! {
        <div class="status-line" role="status" aria-live="polite" data-testid="bank-status">
            {move || step.said.get().map(|said| match said {
                Said::Progress(text) => view! {
                    <p class="progress"><span class="spinner" aria-hidden="true"></span>{text}</p>
                }.into_any(),
                Said::Problem(text) => view! { <p class="error" role="alert">{text}</p> }.into_any(),
            })}
        </div>
        <Show when=offer>
            <p data-testid="bank-waiting">"Your bank asks you to confirm this payment."</p>
            <noscript>
                <p class="error">"Confirming it with your bank happens in your browser and needs JavaScript here."</p>
            </noscript>
            <button
                type="button"
                class="primary"
                data-testid="bank-continue"
                disabled=move || !ready.get()
                on:click=move |_| step.resume(order_id, live)
            >
                "Continue with your bank"
            </button>
        </Show>
    }
}

/// The step through `card-entry.js`; the shop's last answer, or `Err` when it could not run.
async fn run_with_stripe_js(
    order_id: Uuid,
    payment_id: Uuid,
) -> Result<(u16, serde_json::Value), ()> {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let window = web_sys::window().ok_or(())?;
        let step = js_sys::Reflect::get(&window, &"onceBankStep".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .ok_or(())?;
        let promise = step
            .call2(
                &window,
                &order_id.to_string().into(),
                &payment_id.to_string().into(),
            )
            .ok()
            .and_then(|p| p.dyn_into::<js_sys::Promise>().ok())
            .ok_or(())?;
        let answer = wasm_bindgen_futures::JsFuture::from(promise)
            .await
            .map_err(|_| ())?;
        let field = |name: &str| js_sys::Reflect::get(&answer, &name.into()).map_err(|_| ());
        let status = field("status")?.as_f64().ok_or(())? as u16;
        let body = js_sys::JSON::stringify(&field("body")?)
            .ok()
            .and_then(|s| s.as_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
        Ok((status, body))
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (order_id, payment_id);
        Err(())
    }
}
