//! What the shopper pays with, as the body of `POST /api/orders/{id}/payments` names it: a
//! card number for the sandbox, a payment method made by Stripe.js for Stripe. Each provider
//! takes one; the other is refused before anything is stored (docs/payments.md).

use serde::Deserialize;

use crate::{
    error::ApiError,
    payment_provider::{Instrument, InstrumentKind},
};

/// The body of `POST /api/orders/{id}/payments`: one of two, the one the shop's provider
/// takes. The amount is the order's, never the client's.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum PayBody {
    CardNumber(CardNumberBody),
    PaymentMethod(PaymentMethodBody),
}

/// Paying through the sandbox provider.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CardNumberBody {
    /// 12 to 19 digits, spaces allowed; sent to the provider, never stored. The sandbox
    /// declines 4000000000000002 and charges the others.
    #[schema(pattern = "^ *(?:[0-9] *){12,19}$", example = "4242 4242 4242 4242")]
    card_number: String,
}

/// Paying through Stripe.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentMethodBody {
    /// The id of the PaymentMethod Stripe.js made in the browser (`pm_…`); the card itself
    /// never reaches the shop.
    #[schema(pattern = "^pm_[A-Za-z0-9_]{1,252}$", example = "pm_card_visa")]
    payment_method: String,
}

/// Reads the instrument from the body, if it is the kind `accepted`.
pub fn parse(body: &serde_json::Value, accepted: InstrumentKind) -> Result<Instrument, ApiError> {
    let body = PayBody::deserialize(body).map_err(|_| {
        ApiError::bad_request(
            "invalid-body",
            "the payment body is not valid: it is {\"card_number\": \"…\"} or \
             {\"payment_method\": \"pm_…\"}, and nothing else",
        )
    })?;
    match (accepted, body) {
        (InstrumentKind::CardNumber, PayBody::CardNumber(b)) => card_number(&b.card_number),
        (InstrumentKind::PaymentMethod, PayBody::PaymentMethod(b)) => {
            payment_method(b.payment_method)
        }
        (InstrumentKind::CardNumber, _) => Err(ApiError::unprocessable(
            "invalid-card",
            "this shop takes a card_number (12 to 19 digits), and nothing else",
        )),
        (InstrumentKind::PaymentMethod, _) => Err(ApiError::unprocessable(
            "invalid-card",
            "this shop takes cards through Stripe.js: send the payment_method it made, never \
             a card number",
        )),
    }
}

fn card_number(card: &str) -> Result<Instrument, ApiError> {
    let digits: String = card.chars().filter(|c| *c != ' ').collect();
    if !(12..=19).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::unprocessable(
            "invalid-card",
            "a card number is 12 to 19 digits",
        ));
    }
    Ok(Instrument::CardNumber(digits))
}

fn payment_method(method: String) -> Result<Instrument, ApiError> {
    let plain = method
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !method.starts_with("pm_") || !(4..=255).contains(&method.len()) || !plain {
        return Err(ApiError::unprocessable(
            "invalid-card",
            "a payment method is the PaymentMethod id Stripe.js made: pm_, then letters, digits and _",
        ));
    }
    Ok(Instrument::PaymentMethod(method))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(body: serde_json::Value, kind: InstrumentKind) -> String {
        match parse(&body, kind) {
            Err(e) => e.to_string(),
            Ok(i) => panic!("accepted {i:?}"),
        }
    }

    #[test]
    fn each_provider_takes_its_own_instrument_only() {
        let card = json!({"card_number": "4242 4242 4242 4242"});
        let method = json!({"payment_method": "pm_card_visa"});
        assert!(matches!(
            parse(&card, InstrumentKind::CardNumber),
            Ok(Instrument::CardNumber(d)) if d == "4242424242424242"
        ));
        assert!(matches!(
            parse(&method, InstrumentKind::PaymentMethod),
            Ok(Instrument::PaymentMethod(m)) if m == "pm_card_visa"
        ));
        problem(card, InstrumentKind::PaymentMethod);
        problem(method, InstrumentKind::CardNumber);
        let both = json!({"card_number": "4242424242424242", "payment_method": "pm_card_visa"});
        assert!(problem(both, InstrumentKind::PaymentMethod).contains("nothing else"));
        assert!(problem(json!({}), InstrumentKind::CardNumber).contains("nothing else"));
        let nulls = json!({"card_number": null, "payment_method": null});
        assert!(problem(nulls, InstrumentKind::CardNumber).contains("nothing else"));
        problem(
            json!({"payment_method": "pm_1/../x"}),
            InstrumentKind::PaymentMethod,
        );
        problem(json!({"card_number": "42"}), InstrumentKind::CardNumber);
    }
}
