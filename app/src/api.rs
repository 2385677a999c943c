//! Server functions: the UI's typed calls into the server. Bodies run on the server only and
//! delegate to the [`crate::backend`] handle. They live under `/_fn/`, apart from the
//! JSON API under `/api/`.

use leptos::prelude::*;

use domain::{Cart, Checkout, Order, OrderPage, Product};

#[server(prefix = "/_fn", endpoint = "list_products")]
pub async fn list_products() -> Result<Vec<Product>, ServerFnError> {
    crate::backend::backend()?.products().await.map_err(failed)
}

#[server(prefix = "/_fn", endpoint = "get_cart")]
pub async fn get_cart() -> Result<Cart, ServerFnError> {
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .cart(session)
        .await
        .map_err(failed)
}

/// Adds to the cart once per `add_key`: the form carries a key, so a double click (or a
/// re-posted form before the page is interactive) adds once.
#[server(prefix = "/_fn", endpoint = "add_to_cart")]
pub async fn add_to_cart(
    sku: String,
    quantity: i64,
    add_key: String,
) -> Result<Cart, ServerFnError> {
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .add_to_cart(session, sku, quantity, add_key)
        .await
        .map_err(failed)
}

/// Sets the quantity of a cart line; `0` removes it. Setting is idempotent: no key.
#[server(prefix = "/_fn", endpoint = "set_cart_quantity")]
pub async fn set_cart_quantity(sku: String, quantity: i64) -> Result<Cart, ServerFnError> {
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .set_cart_quantity(session, sku, quantity)
        .await
        .map_err(failed)
}

/// Keeps the shopper's details as typed at the checkout (see `ShopBackend`), field by field
/// as the checkout form names them.
#[server(prefix = "/_fn", endpoint = "save_checkout_details")]
pub async fn save_checkout_details(
    email: String,
    name: String,
    line1: String,
    line2: String,
    postal_code: String,
    city: String,
    country: String,
) -> Result<(), ServerFnError> {
    use domain::details::{DetailsDraft, ShippingAddress};
    let session = crate::backend::session().await?;
    let details = DetailsDraft {
        email,
        shipping_address: ShippingAddress {
            name,
            line1,
            line2,
            postal_code,
            city,
            country,
        },
    };
    crate::backend::backend()?
        .save_checkout_details(session, details)
        .await
        .map_err(failed)
}

/// A refused call answers 422 (the database away 503, another failure of ours 500), with the
/// code of its shopper-safe message. A form
/// posted without wasm is the exception: it is sent back to its page, with the error in
/// the URL (`__err`, shown by `components::form_error`), which a 4xx would prevent.
#[cfg(feature = "ssr")]
fn failed(e: crate::backend::BackendError) -> ServerFnError {
    let from_plain_form = use_context::<http::request::Parts>().is_some_and(|request| {
        request
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
    });
    if let (false, Some(response)) = (
        from_plain_form,
        use_context::<leptos_axum::ResponseOptions>(),
    ) {
        response.set_status(if e.refused {
            http::StatusCode::UNPROCESSABLE_ENTITY
        } else if e.unavailable {
            http::StatusCode::SERVICE_UNAVAILABLE
        } else {
            http::StatusCode::INTERNAL_SERVER_ERROR
        });
    }
    ServerFnError::ServerError(e.message.to_owned())
}

/// The text to show for a failed server function call: the words of the code the server
/// sent (a code the shop does not issue, as a forged `__err` would carry, shows our
/// generic words, never its own).
pub fn shown_error(e: &ServerFnError) -> String {
    let text = match e {
        ServerFnError::ServerError(code) => {
            crate::messages::text(code).or(crate::messages::text(crate::messages::OUR_FAILURE))
        }
        // A form whose fields did not parse (posted without wasm, then sent back here).
        ServerFnError::Args(_)
        | ServerFnError::MissingArg(_)
        | ServerFnError::Deserialization(_) => {
            crate::messages::text(crate::messages::FORM_INCOMPLETE)
        }
        _ => None,
    };
    text.unwrap_or("We could not reach the shop. Please try again.")
        .to_owned()
}

/// A new key for the next "Add to cart" of a form the server renders.
#[server(prefix = "/_fn", endpoint = "fresh_key")]
pub async fn fresh_key() -> Result<String, ServerFnError> {
    Ok(crate::backend::backend()?.fresh_key())
}

#[server(prefix = "/_fn", endpoint = "get_checkout")]
pub async fn get_checkout() -> Result<Checkout, ServerFnError> {
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .checkout(session)
        .await
        .map_err(failed)
}

/// The order and fresh keys for paying and cancelling it; `None` when the order does not exist or
/// belongs to another session.
#[server(prefix = "/_fn", endpoint = "get_order")]
pub async fn get_order(id: String) -> Result<Option<OrderPage>, ServerFnError> {
    let backend = crate::backend::backend()?;
    let Some(order) = find_order(&id).await? else {
        return Ok(None);
    };
    let awaiting_bank = match order.status {
        domain::OrderStatus::PendingPayment => backend
            .payment_awaiting_bank(crate::backend::session().await?, order.id)
            .await
            .map_err(failed)?,
        _ => None,
    };
    Ok(Some(OrderPage {
        order,
        pay_key: backend.fresh_key(),
        cancel_key: backend.fresh_key(),
        key_retention_secs: backend.key_retention_secs(),
        card_entry: backend.card_entry(),
        awaiting_bank,
    }))
}

/// The order as it is now, for the order page to poll while its payment settles and its
/// fulfillment runs.
#[server(prefix = "/_fn", endpoint = "get_order_progress")]
pub async fn get_order_progress(id: String) -> Result<Option<Order>, ServerFnError> {
    find_order(&id).await
}

#[cfg(feature = "ssr")]
async fn find_order(id: &str) -> Result<Option<Order>, ServerFnError> {
    let Ok(id) = uuid::Uuid::parse_str(id) else {
        return Ok(None);
    };
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .order(session, id)
        .await
        .map_err(failed)
}

#[server(prefix = "/_fn", endpoint = "list_orders")]
pub async fn list_orders() -> Result<Vec<Order>, ServerFnError> {
    let session = crate::backend::session().await?;
    crate::backend::backend()?
        .orders(session)
        .await
        .map_err(failed)
}
