//! The checkout's details: the shopper's email and shipping address, as form fields with
//! labels, autocomplete hints and each field's problem said next to it. The same fields post
//! with the no-wasm form (their names are the form's, `server::checkout`) and feed the
//! hydrated page's request; each change is kept with the cart (`save_checkout_details`), so
//! that a reload shows what was typed.

use leptos::prelude::*;

use crate::api::SaveCheckoutDetails;
use domain::details::{DetailsDraft, FieldProblem, COUNTRIES};

/// One field of the form: its name in the form and in the API's problems, its label, and
/// its autocomplete hint.
struct Field {
    form_name: &'static str,
    api_name: &'static str,
    label: &'static str,
    autocomplete: &'static str,
    required: bool,
}

const FIELDS: &[Field] = &[
    field(
        "email",
        "email",
        "Email, for the order's confirmation",
        "email",
        true,
    ),
    field(
        "name",
        "shipping_address.name",
        "Full name",
        "shipping name",
        true,
    ),
    field(
        "line1",
        "shipping_address.line1",
        "Street and number",
        "shipping address-line1",
        true,
    ),
    field(
        "line2",
        "shipping_address.line2",
        "Flat, floor, building (optional)",
        "shipping address-line2",
        false,
    ),
    field(
        "postal_code",
        "shipping_address.postal_code",
        "Postal code",
        "shipping postal-code",
        true,
    ),
    field(
        "city",
        "shipping_address.city",
        "City",
        "shipping address-level2",
        true,
    ),
];

const fn field(
    form_name: &'static str,
    api_name: &'static str,
    label: &'static str,
    autocomplete: &'static str,
    required: bool,
) -> Field {
    Field {
        form_name,
        api_name,
        label,
        autocomplete,
        required,
    }
}

/// The text of a field of `draft`, by its form name.
fn value_of<'a>(draft: &'a DetailsDraft, form_name: &str) -> &'a str {
    let a = &draft.shipping_address;
    match form_name {
        "email" => &draft.email,
        "name" => &a.name,
        "line1" => &a.line1,
        "line2" => &a.line2,
        "postal_code" => &a.postal_code,
        "city" => &a.city,
        _ => &a.country,
    }
}

fn set_value(draft: &mut DetailsDraft, form_name: &str, value: String) {
    let a = &mut draft.shipping_address;
    match form_name {
        "email" => draft.email = value,
        "name" => a.name = value,
        "line1" => a.line1 = value,
        "line2" => a.line2 = value,
        "postal_code" => a.postal_code = value,
        "city" => a.city = value,
        _ => a.country = value,
    }
}

/// What is wrong with the field named `api_name`, if anything.
fn problem_of(problems: &[FieldProblem], api_name: &str) -> Option<String> {
    problems
        .iter()
        .find(|p| p.field == api_name)
        .map(|p| p.detail.clone())
}

/// Keeps the draft with the cart (the latest change wins; a failure only costs a reload's
/// memory of it: the order carries what the fields hold).
fn keep(save: ServerAction<SaveCheckoutDetails>, draft: &DetailsDraft) {
    let a = draft.shipping_address.clone();
    save.dispatch(SaveCheckoutDetails {
        email: draft.email.clone(),
        name: a.name,
        line1: a.line1,
        line2: a.line2,
        postal_code: a.postal_code,
        city: a.city,
        country: a.country,
    });
}

/// The details' fieldset. `problems` are shown next to their fields.
#[component]
pub fn DetailsFields(
    details: RwSignal<DetailsDraft>,
    problems: RwSignal<Vec<FieldProblem>>,
) -> impl IntoView {
    let save = ServerAction::<SaveCheckoutDetails>::new();
    let initial = details.get_untracked();
    let texts = FIELDS
        .iter()
        .map(|f| {
            view! {
                <TextField field=f initial=value_of(&initial, f.form_name).to_owned() details problems save/>
            }
        })
        .collect_view();
    let country = initial.shipping_address.country.clone();
    view! {
        <fieldset class="details">
            <legend>"Your details"</legend>
            {texts}
            <CountryField initial=country details problems save/>
        </fieldset>
    }
}

#[component]
fn TextField(
    field: &'static Field,
    initial: String,
    details: RwSignal<DetailsDraft>,
    problems: RwSignal<Vec<FieldProblem>>,
    save: ServerAction<SaveCheckoutDetails>,
) -> impl IntoView {
    let id = format!("details-{}", field.form_name);
    let error_id = format!("{id}-error");
    let problem = move || problems.with(|p| problem_of(p, field.api_name));
    let kind = if field.form_name == "email" {
        "email"
    } else {
        "text"
    };
    view! {
        <div class="field">
            <label for=id.clone()>{field.label}</label>
            <input
                id=id
                type=kind
                name=field.form_name
                autocomplete=field.autocomplete
                aria-required=field.required.to_string()
                aria-invalid=move || problem().is_some().to_string()
                aria-describedby=error_id.clone()
                value=initial
                on:input=move |ev| details.update(|d| set_value(d, field.form_name, event_target_value(&ev)))
                on:change=move |_| keep(save, &details.get_untracked())
            />
            <p class="field-error" id=error_id.clone() data-testid=error_id>{problem}</p>
        </div>
    }
}

#[component]
fn CountryField(
    initial: String,
    details: RwSignal<DetailsDraft>,
    problems: RwSignal<Vec<FieldProblem>>,
    save: ServerAction<SaveCheckoutDetails>,
) -> impl IntoView {
    let problem = move || problems.with(|p| problem_of(p, "shipping_address.country"));
    let options = COUNTRIES
        .iter()
        .map(|(code, name)| {
            view! { <option value=*code selected=initial == *code>{*name}</option> }
        })
        .collect_view();
    view! {
        <div class="field">
            <label for="details-country">"Country"</label>
            <select
                id="details-country"
                name="country"
                autocomplete="shipping country"
                aria-required="true"
                aria-invalid=move || problem().is_some().to_string()
                aria-describedby="details-country-error"
                on:change=move |ev| {
                    details.update(|d| set_value(d, "country", event_target_value(&ev)));
                    keep(save, &details.get_untracked());
                }
            >
                <option value="" selected=initial.is_empty()>"Choose…"</option>
                {options}
            </select>
            <p class="field-error" id="details-country-error" data-testid="details-country-error">{problem}</p>
        </div>
    }
}
