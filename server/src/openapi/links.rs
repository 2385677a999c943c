//! The links between operations (OpenAPI `links`): an order that `create_order` or
//! `check_out_cart` made can be paid, read, asked for its payments and cancelled, by the
//! order's `id` in the answer; a payment and a cancellation lead back to their order. A
//! client reads them as the map of what follows what; schemathesis's stateful phase follows
//! them (`scripts/api-fuzz`).

use utoipa::openapi::{link::LinkBuilder, path::Operation, OpenApi, RefOr};

/// Where a link leads: its name in the answer, and the operation it names.
type Target = (&'static str, &'static str);

/// What follows an answer carrying an order.
const AFTER_AN_ORDER: &[Target] = &[
    ("pay", "pay_order"),
    ("read", "get_order"),
    ("payments", "list_payments"),
    ("cancel", "cancel_order"),
];

/// What follows a payment: its order.
const AFTER_A_PAYMENT: &[Target] = &[("order", "get_order"), ("payments", "list_payments")];

/// An answer that leads on: every target takes the order as its path's `id`.
struct LinksFrom {
    operation: &'static str,
    status: &'static str,
    /// Where the order's id is in the answer.
    order_id: &'static str,
    targets: &'static [Target],
}

const LINKS: &[LinksFrom] = &[
    LinksFrom {
        operation: "create_order",
        status: "201",
        order_id: "$response.body#/id",
        targets: AFTER_AN_ORDER,
    },
    LinksFrom {
        operation: "check_out_cart",
        status: "201",
        order_id: "$response.body#/id",
        targets: AFTER_AN_ORDER,
    },
    LinksFrom {
        operation: "pay_order",
        status: "201",
        order_id: "$response.body#/order_id",
        targets: AFTER_A_PAYMENT,
    },
    LinksFrom {
        operation: "cancel_order",
        status: "200",
        order_id: "$response.body#/id",
        targets: &[("read", "get_order")],
    },
];

/// Adds the links to the answers that lead on. Panics when an operation or an answer named
/// above is missing, which the document's own tests show at once.
pub fn add_links(doc: &mut OpenApi) {
    for from in LINKS {
        let operation = operation_named(doc, from.operation)
            .unwrap_or_else(|| panic!("no operation {} to link from", from.operation));
        let Some(RefOr::T(answer)) = operation.responses.responses.get_mut(from.status) else {
            panic!(
                "{} has no {} answer to link from",
                from.operation, from.status
            );
        };
        for (name, target) in from.targets {
            let link = LinkBuilder::new()
                .operation_id(*target)
                .parameter("id", from.order_id)
                .build();
            answer.links.insert((*name).to_owned(), RefOr::T(link));
        }
    }
}

fn operation_named<'a>(doc: &'a mut OpenApi, id: &str) -> Option<&'a mut Operation> {
    doc.paths.paths.values_mut().find_map(|item| {
        [
            item.get.as_mut(),
            item.post.as_mut(),
            item.put.as_mut(),
            item.patch.as_mut(),
            item.delete.as_mut(),
        ]
        .into_iter()
        .flatten()
        .find(|operation| operation.operation_id.as_deref() == Some(id))
    })
}
