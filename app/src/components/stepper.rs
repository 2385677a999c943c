use leptos::prelude::*;

/// A quantity input with − and + buttons. Without wasm it is a plain number field whose
/// value is in the server's HTML, so the form still posts a quantity; once hydrated the
/// buttons adjust it.
#[component]
pub fn QuantityStepper(
    #[prop(into)] label: String,
    quantity: RwSignal<u32>,
    #[prop(default = 99)] max: u32,
) -> impl IntoView {
    let set = move |q: u32| quantity.set(q.clamp(1, max));
    view! {
        <div class="stepper">
            <button type="button" aria-label=format!("Fewer {label}") on:click=move |_| set(quantity.get().saturating_sub(1))>"−"</button>
            <input
                type="number"
                name="quantity"
                min="1"
                max=max
                aria-label=format!("Quantity of {label}")
                value=quantity.get_untracked()
                prop:value=move || quantity.get().to_string()
                on:input=move |ev| set(event_target_value(&ev).parse().unwrap_or(1))
            />
            <button type="button" aria-label=format!("More {label}") on:click=move |_| set(quantity.get() + 1)>"+"</button>
        </div>
    }
}
