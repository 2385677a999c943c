//! The words the shop shows about a refused or failed form, by code. The server sends codes,
//! never text, wherever the message travels through an address the shopper's browser can
//! be sent to by anyone (`/checkout?problem=…`, a no-wasm form's `__err`), and the pages
//! show only the text of a code listed here: a link made elsewhere cannot make the shop
//! display words of someone else's choosing.

pub const SESSION_ENDED: &str = "session-ended";
pub const UNKNOWN_PRODUCT: &str = "unknown-product";
pub const BAD_QUANTITY: &str = "bad-quantity";
pub const TOO_MANY_LINES: &str = "too-many-lines";
pub const FORM_INCOMPLETE: &str = "form-incomplete";
pub const NOT_IN_CART: &str = "not-in-cart";
pub const OUR_FAILURE: &str = "our-failure";
pub const STILL_PROCESSING: &str = "still-processing";
pub const NOT_PLACED: &str = "not-placed";
pub const NOT_ACCEPTED: &str = "not-accepted";
pub const CART_ADD_QUOTA: &str = "cart-add-quota";
pub const INVALID_DETAILS: &str = "invalid-details";

const TEXTS: &[(&str, &str)] = &[
    (SESSION_ENDED, "Your session had ended. Please check your cart and try again."),
    (UNKNOWN_PRODUCT, "That product is not in the shop."),
    (BAD_QUANTITY, "A quantity must be between 1 and 99."),
    (TOO_MANY_LINES, "A cart holds at most 20 different products."),
    (FORM_INCOMPLETE, "The form was incomplete. Please reload the page and try again."),
    (NOT_IN_CART, "That product is no longer in your cart."),
    (OUR_FAILURE, "Something went wrong on our side. Please try again."),
    (STILL_PROCESSING, "Your order is still being processed. Check My orders in a moment."),
    (NOT_PLACED, "The shop could not place your order just now. Please try again."),
    (NOT_ACCEPTED, "The shop could not accept this order."),
    // The order refusals, by their problem type (the API's names).
    ("cart-changed", "Your cart changed since this page was shown (perhaps in another tab). Please check it and place the order again."),
    ("out-of-stock", "Some of your cart is not in stock in the quantity you chose (see each line). Lower the quantity and place the order again."),
    ("unknown-sku", "Something in your cart is no longer sold. Please check your cart and place the order again."),
    ("mixed-currencies", "Your cart mixes prices in different currencies; please order them separately."),
    ("invalid-order", "Your cart cannot be ordered as it is. Please check it and try again."),
    ("pending-order-quota", "You have as many orders waiting for payment as the shop keeps open at once. Pay or cancel one of them, then place this order again."),
    ("client-pending-order-quota", "Many orders placed from your network are waiting for payment. The shop takes more once some of them are paid, cancelled or expired: please try again later."),
    ("client-hourly-order-quota", "Many orders were placed from your network in the last hour. The shop takes more later: please try again then."),
    ("rate-limited", "The shop is receiving too many requests from you right now. Wait a moment and try again."),
    (INVALID_DETAILS, "Some of your details need fixing: see the fields marked below."),
    ("idempotency-key-reused", "Your order was already sent with the details you entered first, and the shop places it with those. To change them, cancel that order in My orders and order again."),
    (CART_ADD_QUOTA, "You have changed your cart very often in the last hour. Please wait a while before adding more."),
];

/// The text for a code the shop issues; `None` for anything else.
pub fn text(code: &str) -> Option<&'static str> {
    TEXTS.iter().find(|(c, _)| *c == code).map(|(_, t)| *t)
}

/// The code to send for a refusal of the order whose problem type is `name`.
pub fn for_order_problem(name: &str) -> &str {
    match text(name) {
        Some(_) => name,
        None => NOT_ACCEPTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_codes_have_words() {
        assert!(text(SESSION_ENDED).is_some());
        assert!(text("out-of-stock").is_some());
        assert_eq!(text("Your card was stolen: call +1 555 0100"), None);
        assert_eq!(for_order_problem("anything else"), NOT_ACCEPTED);
    }

    #[test]
    fn every_code_is_listed_once() {
        for (i, (code, _)) in TEXTS.iter().enumerate() {
            assert!(
                TEXTS[i + 1..].iter().all(|(other, _)| other != code),
                "{code}"
            );
        }
    }
}
