//! A signed callback proves that the provider (or someone holding its secret) sent it, not
//! that the charge it names is the attempt's, nor that the charge ended as it says, nor
//! what it was for. So a callback that could change an attempt is applied only when the
//! provider, asked by the attempt's id, lists that charge for the attempt with the status
//! the callback claims — and then with the charge *as the provider lists it*: its amount
//! and currency are the provider's, never the callback's (docs/payments.md, "Callbacks").
//! A callback whose amount or currency differs from the provider's charge is refused as an
//! `amount_mismatch`, recorded and logged, and changes nothing.
//! (A callback that can change nothing — its attempt has moved past it — is recorded
//! without asking, and, when its amount is the order's, without applying.)
//! Anything else is recorded as `unconfirmed` and changes nothing: a callback can never
//! rewrite an attempt's charge id with one the provider did not issue for it.
//!
//! The provider is asked before the callback's transaction opens (no lock is held across a
//! call); when it cannot be asked, the callback answers 503 and the provider delivers it
//! again.

use sqlx::PgPool;
use uuid::Uuid;

use super::Event;
use crate::{
    error::ApiError,
    payment_provider::{Charge, Provider},
};

/// `event` with the provider's own charge in it; [`Event::Unconfirmed`] when it could change
/// its attempt and the provider does not list its charge for the attempt with the status it
/// claims; [`Event::Disputed`] when the provider's charge is for another amount or currency
/// than the callback says.
pub async fn confirmed(db: &PgPool, provider: &Provider, event: Event) -> Result<Event, ApiError> {
    let (data, status) = match &event {
        Event::Succeeded(data) => (data, "succeeded"),
        Event::Failed(data) => (data, "failed"),
        Event::Other
        | Event::Malformed
        | Event::Unconfirmed(_)
        | Event::Disputed(_)
        | Event::Settled(_) => return Ok(event),
    };
    // A reference that names no attempt of ours is refused as unknown when applied.
    let Ok(payment_id) = Uuid::parse_str(&data.reference) else {
        return Ok(event);
    };
    let Some(attempt) = sqlx::query!(
        "SELECT p.status, o.total_cents, o.currency FROM payments p
           JOIN orders o ON o.id = p.order_id WHERE p.id = $1",
        payment_id
    )
    .fetch_optional(db)
    .await?
    else {
        return Ok(event);
    };
    // Attempts only move forward: one the callback can no longer change needs no asking.
    // One it can change is always asked about, even for the charge the attempt recorded:
    // a declined attempt records its declined charge, which a success must not revive.
    let can_change = match status {
        "succeeded" => matches!(attempt.status.as_str(), "pending" | "failed"),
        _ => attempt.status == "pending",
    };
    if !can_change {
        // Nor does it need applying when its amount is the order's: applying would change
        // nothing (an order's total never changes), so no row is locked for it. A mismatch
        // goes through `apply`, which refuses it.
        let matches_order =
            data.amount_cents == attempt.total_cents && data.currency == attempt.currency;
        return Ok(match event {
            Event::Succeeded(data) | Event::Failed(data) if status == "failed" || matches_order => {
                Event::Settled(data)
            }
            other => other,
        });
    }
    let listed = provider.charge_for(payment_id, &data.id).await?;
    if let Some(charge) = listed.filter(|c| c.status == status) {
        return Ok(as_listed(event, charge, payment_id));
    }
    tracing::warn!(payment = %payment_id, charge = %data.id, status,
        "a callback names a charge the provider does not list for the attempt; not applied");
    match event {
        Event::Succeeded(data) | Event::Failed(data) => Ok(Event::Unconfirmed(data)),
        other => Ok(other),
    }
}

/// The event with the provider's charge in place of the callback's account of it, or
/// [`Event::Disputed`] when the two disagree on what was charged.
fn as_listed(event: Event, listed: Charge, payment_id: Uuid) -> Event {
    let (Event::Succeeded(claimed) | Event::Failed(claimed)) = &event else {
        return event;
    };
    if claimed.amount_cents != listed.amount_cents || claimed.currency != listed.currency {
        tracing::warn!(payment = %payment_id, charge = %listed.id,
            claimed = claimed.amount_cents, claimed_currency = %claimed.currency,
            listed = listed.amount_cents, listed_currency = %listed.currency,
            "a callback's amount differs from the provider's charge; refused as a mismatch");
        return Event::Disputed(claimed.clone());
    }
    // The provider's charge, under the attempt the callback named (and the provider
    // confirmed): what is applied is what the provider says was charged.
    let charge = Charge {
        reference: claimed.reference.clone(),
        ..listed
    };
    match event {
        Event::Succeeded(_) => Event::Succeeded(charge),
        _ => Event::Failed(charge),
    }
}
