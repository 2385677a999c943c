//! `NewOrder`: the body of `POST /api/orders`, parsed before anything touches the database,
//! so bad input is refused without storing anything (not even the idempotency key).

use std::collections::HashSet;

use serde::Deserialize;

use crate::error::ApiError;

pub const MAX_LINES: usize = 20;
pub const MAX_QUANTITY: i64 = 99;

#[derive(Clone, Debug)]
pub struct NewOrder {
    pub lines: Vec<NewLine>,
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
        let body: NewOrderBody = serde_json::from_value(body.clone()).map_err(|e| {
            ApiError::bad_request("invalid-body", format!("the order body is not valid: {e}"))
        })?;
        if body.items.is_empty() {
            return Err(invalid("an order needs at least one item"));
        }
        if body.items.len() > MAX_LINES {
            return Err(invalid(format!("an order has at most {MAX_LINES} lines")));
        }
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
        Ok(Self { lines })
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

    #[test]
    fn a_valid_body_parses() {
        let order =
            NewOrder::parse(&json!({"items": [{"sku": "MUG-001", "quantity": 2}]})).unwrap();
        assert_eq!(order.lines[0].sku, "MUG-001");
        assert_eq!(order.lines[0].quantity, 2);
    }

    #[test]
    fn limits_are_enforced() {
        for body in [
            json!({"items": []}),
            json!({"items": [{"sku": "MUG-001", "quantity": 0}]}),
            json!({"items": [{"sku": "MUG-001", "quantity": 100}]}),
            json!({"items": [{"sku": "MUG-001", "quantity": 1}, {"sku": "MUG-001", "quantity": 1}]}),
            json!({"items": (0..21).map(|i| json!({"sku": format!("S{i}"), "quantity": 1})).collect::<Vec<_>>()}),
        ] {
            assert_eq!(NewOrder::parse(&body).unwrap_err().status(), 422, "{body}");
        }
    }

    #[test]
    fn wrong_shapes_are_bad_requests() {
        for body in [
            json!([]),
            json!({"items": "x"}),
            json!({"items": [{"sku": 1, "quantity": 1}]}),
            json!({"items": [{"sku": "A", "quantity": 1.5}]}),
            json!({"items": [{"sku": "A", "quantity": "2"}]}),
        ] {
            assert_eq!(NewOrder::parse(&body).unwrap_err().status(), 400, "{body}");
        }
    }

    #[test]
    fn a_whole_number_written_as_a_float_is_a_quantity() {
        let order =
            NewOrder::parse(&json!({"items": [{"sku": "MUG-001", "quantity": 2.0}]})).unwrap();
        assert_eq!(order.lines[0].quantity, 2);
        let huge = json!({"items": [{"sku": "MUG-001", "quantity": 1e300}]});
        assert_eq!(NewOrder::parse(&huge).unwrap_err().status(), 400);
    }
}
