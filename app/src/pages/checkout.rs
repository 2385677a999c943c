use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::{
    api::{get_checkout, SetCartQuantity},
    components::{
        cart_count::announce,
        cart_lines::CartLines,
        details_fields::DetailsFields,
        live::mark_live,
        preload::PreloadLazyIsland,
        status_line::{Notice, StatusLine},
    },
    messages, query,
};
use domain::{
    details::{Details, DetailsDraft, FieldProblem},
    Checkout, Order,
};
use once_leptos::{
    reload_to, use_submit_once, KeyOwner, Messages, Options, Origin, Problem, Status,
};

/// The cart and the checkout form. Without wasm the form posts to `/checkout` (and the
/// server redirects to the order); once hydrated, the submit-once hook owns the submit and
/// posts to `/api/checkout`. Both carry the cart's checkout key, which the server keeps
/// with the cart: every render, tab and retry of the same cart submits under one key.
#[component]
pub fn CheckoutPage() -> impl IntoView {
    let checkout = Resource::new(|| (), |_| get_checkout());
    // Only words the shop issues: the address carries a code (`crate::messages`).
    let code = move || use_query_map().read().get("problem");
    let problem = move || code().and_then(|code| messages::text(&code));
    // Sent back by the no-wasm form: the fields it kept are marked with their problems.
    let fix_details = move || code().as_deref() == Some(messages::INVALID_DETAILS);
    view! {
        <Title text="Your cart · Once"/>
        <PreloadLazyIsland island="checkout_panel_loader_"/>
        <h1 tabindex="-1">"Your cart"</h1>
        {move || problem().map(|p| view! { <p class="error" role="alert">{p}</p> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading your cart…"</p> }>
            <ErrorBoundary fallback=|_| view! { <p class="error" role="alert">"Your cart could not be loaded. Please reload."</p> }>
                {move || Suspend::new(async move {
                    let fix_details = fix_details();
                    checkout.await.map(|c| view! { <CheckoutPanel checkout=c fix_details/> })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

fn messages() -> Messages {
    Messages {
        sending: "Placing your order…",
        resuming: "Finishing your order…",
        resuming_earlier: "We are finishing your earlier order first…",
        still_running: "Your order is still being processed. Check My orders in a moment; clicking again is safe.",
        ..Messages::default()
    }
}

/// The cart editor and the checkout form: the checkout page's island. Every change of the
/// cart gives it a new key, so after each change the cart and its key are read afresh and
/// the form starts over with them. Until the read after the latest change has come back, the
/// cart on the screen and its key are out of date: ordering waits, and an older read that
/// comes back later is dropped.
#[island(lazy)]
fn CheckoutPanel(checkout: Checkout, fix_details: bool) -> impl IntoView {
    let edit = ServerAction::<SetCartQuantity>::new();
    provide_context(edit);
    // The details outlive the form's renders: a change of the cart renders the form afresh,
    // and what the shopper typed stays.
    let details = Typed {
        draft: RwSignal::new(checkout.details.clone()),
        problems: RwSignal::new(match fix_details {
            true => problems_of(&checkout.details),
            false => Vec::new(),
        }),
    };
    provide_context(details);
    let current = RwSignal::new(checkout);
    let reread = Reread {
        pending: RwSignal::new(false),
        latest: StoredValue::new(0),
    };
    provide_context(reread);
    Effect::watch(
        move || edit.version().get(),
        move |_, _, _| {
            let this = reread.latest.get_value() + 1;
            reread.latest.set_value(this);
            reread.pending.set(true);
            leptos::task::spawn_local(async move {
                let read = get_checkout().await;
                if reread.latest.try_get_value() != Some(this) {
                    return;
                }
                if let Ok(checkout) = read {
                    announce(checkout.cart.item_count());
                    current.try_set(checkout);
                }
                reread.pending.try_set(false);
            })
        },
        false,
    );
    mark_live();
    move || view! { <CheckoutForm checkout=current.get()/> }
}

/// The shopper's details as typed, and the problems shown next to them.
#[derive(Clone, Copy)]
struct Typed {
    draft: RwSignal<DetailsDraft>,
    problems: RwSignal<Vec<FieldProblem>>,
}

fn problems_of(draft: &DetailsDraft) -> Vec<FieldProblem> {
    Details::parse(draft).err().unwrap_or_default()
}

/// The cart's read after a change: whether one is on its way, and the number of the latest.
#[derive(Clone, Copy)]
struct Reread {
    pending: RwSignal<bool>,
    latest: StoredValue<u64>,
}

#[component]
fn CheckoutForm(checkout: Checkout) -> impl IntoView {
    let Checkout {
        cart,
        key,
        key_retention_secs,
        details: _,
    } = checkout;
    let typed = expect_context::<Typed>();
    // What became of an earlier page's order, shown beside this cart instead of acting on it.
    let notice = RwSignal::new(None::<Notice>);
    let mut options = Options::new("checkout", key.clone(), KeyOwner::Server);
    options.policy.resume_within_ms = key_retention_secs as f64 * 1000.0;
    options.messages = messages();
    let submit = use_submit_once(
        options,
        move |order: Order, origin| match origin {
            // The order's own transaction emptied the cart on the server.
            Origin::ThisPage => reload_to(&format!("/orders/{}", order.id)),
            Origin::Earlier => notice.set(Some(Notice::placed(&order))),
            // `Origin` is non-exhaustive: an intent not this page's own is shown, never acted on.
            _ => notice.set(Some(Notice::placed(&order))),
        },
        move |problem: Problem, origin| match origin {
            // The refusal ended the intent on the server, which gave the cart a new key:
            // load the page afresh, so the cart, its key and the reason are shown together,
            // exactly as after the no-wasm form.
            Origin::ThisPage => reload_to(&format!(
                "/checkout?problem={}",
                query::encode(messages::for_order_problem(&problem.name))
            )),
            Origin::Earlier => notice.set(Some(Notice::not_placed(&problem))),
            // `Origin` is non-exhaustive: an intent not this page's own is shown, never acted on.
            _ => notice.set(Some(Notice::not_placed(&problem))),
        },
    );
    let empty = cart.lines.is_empty();
    // The cart is being changed, or read back after a change: its key is about to change
    // too, so no order meanwhile.
    let edit = expect_context::<ServerAction<SetCartQuantity>>();
    let reread = expect_context::<Reread>();
    let changing = move || edit.pending().get() || reread.pending.get();
    let locked = move || submit.busy.get() || changing();
    // The server builds the order from the cart it holds, under the cart's key: a page
    // showing an older cart cannot order it (see `POST /api/checkout`).
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if untrack(changing) {
            // The cart on the screen is about to change: the shopper orders what they see.
            let wait =
                "Your cart is being updated. Place the order once it shows the new quantities.";
            submit.status.set(Some(Status::Progress(wait.into())));
        } else {
            // Checked here with the server's own words, so a field to fix is said at once;
            // the server checks again.
            let draft = typed.draft.get_untracked();
            match Details::parse(&draft) {
                Ok(details) => {
                    typed.problems.set(Vec::new());
                    let body = serde_json::to_string(details.as_draft()).unwrap_or_default();
                    submit.submit("/api/checkout", body);
                }
                Err(problems) => {
                    typed.problems.set(problems);
                    let fix = messages::text(messages::INVALID_DETAILS).unwrap_or_default();
                    submit.status.set(Some(Status::Problem(fix.into())));
                }
            }
        }
    };
    view! {
        <div class="panel">
            {move || notice.get().map(|n| n.view())}
            <Show when=move || !empty fallback=|| view! {
                <p class="empty">"Your cart is empty."</p>
                <a href="/">"Browse the shop"</a>
            }>
                <CartLines cart=cart.clone() locked=submit.busy/>
                <form method="post" action="/checkout" on:submit=on_submit class="checkout-form" novalidate>
                    <input type="hidden" name="idempotency_key" value=key.clone() prop:value=move || submit.key.get()/>
                    <DetailsFields details=typed.draft problems=typed.problems/>
                    <button
                        type="submit"
                        class="primary"
                        aria-disabled=move || locked().to_string()
                    >
                        "Place order"
                    </button>
                </form>
            </Show>
            <StatusLine status=submit.status testid="submit-status"/>
        </div>
    }
}
