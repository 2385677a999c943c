//! The shop's domain types, shared by the server (its API and stores) and the pages (their
//! server functions and views): products, carts, orders and their status. No protocol, no
//! framework: the protocol is the `once-*` crates', the pages are `app`'s.

use serde::{Deserialize, Serialize};

pub mod details;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Product {
    pub sku: String,
    pub name: String,
    pub description: String,
    pub price_cents: i64,
    pub currency: String,
    pub stock: i32,
}

/// The most of one product a cart line (and an order line) may hold.
pub const MAX_QUANTITY: u32 = 99;

/// One line of the shopper's cart, priced from the catalog when it is read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CartLine {
    pub sku: String,
    pub name: String,
    pub quantity: u32,
    pub unit_price_cents: i64,
    pub currency: String,
    /// What the shop has in stock now, so the cart can say when a line asks for more.
    pub in_stock: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cart {
    pub lines: Vec<CartLine>,
}

impl Cart {
    pub fn item_count(&self) -> u32 {
        self.lines.iter().map(|l| l.quantity).sum()
    }

    pub fn total_cents(&self) -> i64 {
        self.lines
            .iter()
            .map(|l| l.unit_price_cents * i64::from(l.quantity))
            .sum()
    }
}

/// The checkout page's data: the cart, and the cart's checkout Idempotency-Key, rendered by
/// the server so that even a submit before hydration carries the key the hook uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkout {
    pub cart: Cart,
    pub key: String,
    /// How long the server keeps a key: an intent older than this is never resumed.
    pub key_retention_secs: u64,
    /// The shopper's details as last typed on this cart (empty the first time).
    pub details: details::DetailsDraft,
}

/// The `POST /api/orders` body for a cart and the shopper's checked details. The server's
/// checkout builds it from the cart it holds and the details the page sent, so a checkout
/// and an API order of the same cart and details carry the same fingerprint, and the same
/// key with other details is another request (docs/protocol.md, "The shopper's details").
pub fn order_request(cart: &Cart, details: &details::Details) -> serde_json::Value {
    let items: Vec<serde_json::Value> = cart
        .lines
        .iter()
        .map(|l| serde_json::json!({ "sku": l.sku, "quantity": l.quantity }))
        .collect();
    let draft = details.as_draft();
    serde_json::json!({
        "items": items,
        "email": draft.email,
        "shipping_address": draft.shipping_address,
    })
}

/// The order page's data: the order, and fresh Idempotency-Keys for its payment and cancel
/// forms (the tab keeps each until its intent ends, see `once_leptos::KeyOwner::Tab`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrderPage {
    pub order: Order,
    pub pay_key: String,
    /// A fresh Idempotency-Key for cancelling the order, kept by the tab like the payment's.
    pub cancel_key: String,
    pub key_retention_secs: u64,
    /// How the card is taken: by the server (the sandbox), or by Stripe.js in the browser.
    pub card_entry: CardEntry,
    /// The payment attempt waiting for the shopper's bank (3-D Secure), if any: the page
    /// offers to continue it.
    #[serde(default)]
    pub awaiting_bank: Option<uuid::Uuid>,
}

/// How the payment form takes the card (docs/payments.md, "Going live with Stripe").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CardEntry {
    /// A card number field, posted to the shop, which hands it to the sandbox provider.
    CardNumber,
    /// Stripe.js, loaded from `js_url` with the publishable key: the card goes from the
    /// browser to Stripe, and the shop receives only the payment method Stripe made.
    StripeJs {
        js_url: String,
        publishable_key: String,
    },
}

/// Where an order is in its life. It only ever moves forward:
/// `pending_payment → paid → fulfilled`, or `pending_payment → cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    PendingPayment,
    Paid,
    Fulfilled,
    Cancelled,
}

impl OrderStatus {
    /// The text shoppers see.
    pub fn label(self) -> &'static str {
        match self {
            Self::PendingPayment => "Pending payment",
            Self::Paid => "Paid",
            Self::Fulfilled => "Fulfilled",
            Self::Cancelled => "Cancelled",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingPayment => "pending_payment",
            Self::Paid => "paid",
            Self::Fulfilled => "fulfilled",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::PendingPayment,
            Self::Paid,
            Self::Fulfilled,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OrderItem {
    pub sku: String,
    pub name: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
}

/// An order as the API and the pages show it. Prices and totals come from the database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Order {
    pub id: uuid::Uuid,
    pub order_no: String,
    pub status: OrderStatus,
    pub currency: String,
    pub total_cents: i64,
    pub items: Vec<OrderItem>,
    /// RFC 3339.
    pub created_at: String,
    /// Set once the order has been handled by fulfillment: shipped or backordered.
    #[serde(default)]
    pub fulfillment: Option<Fulfillment>,
    /// Every status the order has had, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<StatusChange>,
    /// Where the confirmation goes. Absent once the shop has forgotten the order's personal
    /// data (docs/operations.md, "Personal data"), and from the shop's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Where the parcel goes; absent when `email` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_address: Option<details::ShippingAddress>,
}

impl Order {
    /// The order without the person: what the shop's events carry.
    pub fn without_personal_data(&self) -> Self {
        Self {
            email: None,
            shipping_address: None,
            ..self.clone()
        }
    }
}

/// The order entered `status` at `at` (RFC 3339).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusChange {
    pub status: OrderStatus,
    pub at: String,
}

/// How a paid order was fulfilled: `shipped` with a shipment number (and a confirmation
/// email, once queued), or `backordered` when its stock ran out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fulfillment {
    /// `shipped` or `backordered`.
    pub status: String,
    pub shipment_no: Option<String>,
    /// Where the shopper can read the confirmation email.
    pub email_url: Option<String>,
}

/// An RFC 3339 time as people read it, the same on the server and in the browser (so the
/// hydrated page matches the rendered one): `2026-12-01T09:05:00.123+00:00` becomes
/// `2026-12-01 09:05 UTC`. Times are stored and sent in UTC.
pub fn format_time(rfc3339: &str) -> String {
    match (rfc3339.get(0..10), rfc3339.get(11..16)) {
        (Some(date), Some(time)) => format!("{date} {time} UTC"),
        _ => rfc3339.to_owned(),
    }
}

/// Formats integer minor units for people: `1800, "EUR"` becomes `€18.00`.
pub fn format_money(cents: i64, currency: &str) -> String {
    let symbol = match currency {
        "EUR" => "€",
        "USD" => "$",
        "GBP" => "£",
        other => return format!("{} {}.{:02}", other, cents / 100, (cents % 100).abs()),
    };
    format!("{symbol}{}.{:02}", cents / 100, (cents % 100).abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_to_the_minute_in_utc() {
        assert_eq!(
            format_time("2026-12-01T09:05:59.123456+00:00"),
            "2026-12-01 09:05 UTC"
        );
        assert_eq!(format_time("garbage"), "garbage");
    }

    #[test]
    fn money_is_formatted_from_minor_units() {
        assert_eq!(format_money(1800, "EUR"), "€18.00");
        assert_eq!(format_money(5, "USD"), "$0.05");
        assert_eq!(format_money(123456, "CHF"), "CHF 1234.56");
    }
}
