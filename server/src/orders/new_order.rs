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
    /// A product's sku, from GET /api/products.
    #[schema(min_length = 1, max_length = 64, example = "MUG-001")]
    sku: String,
    #[schema(minimum = 1, maximum = 99)]
    quantity: i64,
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
        ] {
            assert_eq!(NewOrder::parse(&body).unwrap_err().status(), 400, "{body}");
        }
    }
}
