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
        self.lines.iter().map(|l| l.unit_price_cents * i64::from(l.quantity)).sum()
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
    fn money_is_formatted_from_minor_units() {
        assert_eq!(format_money(1800, "EUR"), "€18.00");
        assert_eq!(format_money(5, "USD"), "$0.05");
        assert_eq!(format_money(123456, "CHF"), "CHF 1234.56");
    }
}
