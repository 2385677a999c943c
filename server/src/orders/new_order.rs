//! `NewOrder`: the body of `POST /api/orders`, parsed before anything touches the database,
//! so bad input is refused without storing anything (not even the idempotency key).

use std::collections::HashSet;

use domain::details::{Details, DetailsDraft, ShippingAddress};
use serde::Deserialize;

use crate::error::ApiError;

pub const MAX_LINES: usize = 20;
pub const MAX_QUANTITY: i64 = 99;

#[derive(Clone, Debug)]
pub struct NewOrder {
    pub lines: Vec<NewLine>,
    /// Who is buying and where the parcel goes, checked.
    pub details: Details,
}

#[derive(Clone, Debug)]
pub struct NewLine {
    pub sku: String,
    pub quantity: i32,
}

/// The body of `POST /api/orders`, as the API reference shows it.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOrderBody {
    /// 1 to 20 lines, each sku once.
    #[schema(min_items = 1, max_items = 20)]
    items: Vec<NewOrderLine>,
    /// Where the order's confirmation goes: one line, shaped like `name@example.com`, at
    /// most 254 characters.
    #[schema(max_length = 254, example = "ada@example.com")]
    email: String,
    /// Where the parcel goes. Each field is one line; `country` is one the shop ships to.
    shipping_address: ShippingAddress,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOrderLine {
    /// A product's sku, from GET /api/products: letters, digits and hyphens
    /// (`catalog::is_plausible_sku`).
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9-]+$",
        example = "MUG-001"
    )]
    sku: String,
    #[schema(minimum = 1, maximum = 99)]
    #[serde(deserialize_with = "whole_number")]
    quantity: i64,
}

/// An integer as JSON Schema counts them: `2` and `2.0` alike (the reference says
/// `integer`, and a client that writes numbers as floats sends the latter). A fraction, or a
/// number beyond i64, is refused.
fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(n) = number.as_i64() {
        return Ok(n);
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(f as i64),
        _ => Err(serde::de::Error::custom(format!(
            "invalid type: {number}, expected a whole number"
        ))),
    }
}

impl NewOrder {
    pub fn parse(body: &serde_json::Value) -> Result<Self, ApiError> {
        // Read from the borrowed value, not a copy of it: every repeat is parsed too.
        let body = NewOrderBody::deserialize(body).map_err(|e| {
            ApiError::bad_request("invalid-body", format!("the order body is not valid: {e}"))
        })?;
        if body.items.is_empty() {
            return Err(invalid("an order needs at least one item"));
        }
        if body.items.len() > MAX_LINES {
            return Err(invalid(format!("an order has at most {MAX_LINES} lines")));
        }
        // The shopper's details are checked first: each field's problem comes back in one
        // answer, whatever else is wrong with the lines.
        let details = Details::parse(&DetailsDraft {
            email: body.email,
            shipping_address: body.shipping_address,
        })
        .map_err(ApiError::InvalidDetails)?;
        let mut seen = HashSet::new();
        let lines = body
            .items
            .into_iter()
            .map(|line| {
                if !(1..=MAX_QUANTITY).contains(&line.quantity) {
                    return Err(invalid(format!(
                        "quantity of {} must be between 1 and {MAX_QUANTITY}",
                        line.sku
                    )));
                }
                if line.sku.is_empty() || line.sku.len() > 64 {
                    return Err(invalid("a sku is 1 to 64 characters"));
                }
                if !crate::catalog::is_plausible_sku(&line.sku) {
                    // Not a sku the catalog could hold (a NUL, a space): refused here, before
                    // the key is claimed, rather than by the database after it.
                    return Err(ApiError::unprocessable(
                        "unknown-sku",
                        "a sku is letters, digits and hyphens; there is no such product",
                    ));
                }
                if !seen.insert(line.sku.clone()) {
                    return Err(invalid(format!(
                        "{} appears on two lines; use one line with a quantity",
                        line.sku
                    )));
                }
                Ok(NewLine {
                    sku: line.sku,
                    quantity: line.quantity as i32,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { lines, details })
    }

    pub fn skus(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.sku.clone()).collect()
    }
}

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid-order", detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An order body: `items` and a shopper's details.
    fn body(items: serde_json::Value) -> serde_json::Value {
        json!({
            "items": items,
            "email": "ada@example.com",
            "shipping_address": {"name": "Ada Lovelace", "line1": "1 Main Street",
                                 "postal_code": "SW1Y 4JH", "city": "London", "country": "GB"},
        })
    }

    #[test]
    fn a_valid_body_parses() {
        let order = NewOrder::parse(&body(json!([{"sku": "MUG-001", "quantity": 2}]))).unwrap();
        assert_eq!(order.lines[0].sku, "MUG-001");
        assert_eq!(order.lines[0].quantity, 2);
        assert_eq!(order.details.email(), "ada@example.com");
    }

    #[test]
    fn limits_are_enforced() {
        for body in [
            body(json!([])),
            body(json!([{"sku": "MUG-001", "quantity": 0}])),
            body(json!([{"sku": "MUG-001", "quantity": 100}])),
            body(json!([{"sku": "MUG-001", "quantity": 1}, {"sku": "MUG-001", "quantity": 1}])),
            body(json!((0..21)
                .map(|i| json!({"sku": format!("S{i}"), "quantity": 1}))
                .collect::<Vec<_>>())),
        ] {
            assert_eq!(NewOrder::parse(&body).unwrap_err().status(), 422, "{body}");
        }
    }

    #[test]
    fn wrong_shapes_are_bad_requests() {
        for body in [
            json!([]),
            body(json!("x")),
            body(json!([{"sku": 1, "quantity": 1}])),
            body(json!([{"sku": "A", "quantity": 1.5}])),
            body(json!([{"sku": "A", "quantity": "2"}])),
            json!({"items": [{"sku": "A", "quantity": 1}]}),
        ] {
            assert_eq!(NewOrder::parse(&body).unwrap_err().status(), 400, "{body}");
        }
    }

    #[test]
    fn a_whole_number_written_as_a_float_is_a_quantity() {
        let order = NewOrder::parse(&body(json!([{"sku": "MUG-001", "quantity": 2.0}]))).unwrap();
        assert_eq!(order.lines[0].quantity, 2);
        let huge = body(json!([{"sku": "MUG-001", "quantity": 1e300}]));
        assert_eq!(NewOrder::parse(&huge).unwrap_err().status(), 400);
    }

    #[test]
    fn details_that_need_fixing_are_named_in_one_answer() {
        let mut wrong = body(json!([{"sku": "MUG-001", "quantity": 1}]));
        wrong["email"] = json!("ada");
        wrong["shipping_address"]["country"] = json!("XX");
        match NewOrder::parse(&wrong).unwrap_err() {
            ApiError::InvalidDetails(problems) => {
                let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
                assert_eq!(fields, ["email", "shipping_address.country"]);
            }
            other => panic!("expected invalid-details, got {other:?}"),
        }
    }
}
