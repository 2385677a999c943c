//! Data shapes shared by the server and the browser.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Product {
    pub sku: String,
    pub name: String,
    pub description: String,
    pub price_cents: i64,
    pub currency: String,
    pub stock: i32,
}

/// One line of the shopper's cart, priced from the catalog when it is read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CartLine {
    pub sku: String,
    pub name: String,
    pub quantity: u32,
    pub unit_price_cents: i64,
    pub currency: String,
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

/// The checkout page's data: the cart, and a fresh Idempotency-Key for the form, rendered by
/// the server so that even a submit before hydration carries a key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkout {
    pub cart: Cart,
    pub key: String,
}

/// The `POST /api/orders` body for a cart. The server's checkout builds it from the cart it
/// holds, so a checkout and an API order of the same cart carry the same fingerprint.
pub fn order_request(cart: &Cart) -> serde_json::Value {
    let items: Vec<serde_json::Value> = cart
        .lines
        .iter()
        .map(|l| serde_json::json!({ "sku": l.sku, "quantity": l.quantity }))
        .collect();
    serde_json::json!({ "items": items })
}

/// The order page's data: the order, and a fresh Idempotency-Key for its payment form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrderPage {
    pub order: Order,
    pub pay_key: String,
}

/// Where an order is in its life. It only ever moves forward:
/// `pending_payment → paid → fulfilled`, or `pending_payment → cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct OrderItem {
    pub sku: String,
    pub name: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
}

/// An order as the API and the pages show it. Prices and totals come from the database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

/// How a paid order was fulfilled: `shipped` with a shipment number (and a confirmation
/// email, once queued), or `backordered` when its stock ran out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fulfillment {
    pub status: String,
    pub shipment_no: Option<String>,
    /// Where the shopper can read the confirmation email.
    pub email_url: Option<String>,
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
    fn money_is_formatted_from_minor_units() {
        assert_eq!(format_money(1800, "EUR"), "€18.00");
        assert_eq!(format_money(5, "USD"), "$0.05");
        assert_eq!(format_money(123456, "CHF"), "CHF 1234.56");
    }
}
