//! Server functions: the UI's typed calls into the server. Bodies run on the server only and
//! delegate to the [`crate::backend`] handle. They live under `/_fn/`, apart from the
//! JSON API under `/api/`.

use leptos::prelude::*;

use crate::dto::{Cart, Product};

#[server(prefix = "/_fn", endpoint = "list_products")]
pub async fn list_products() -> Result<Vec<Product>, ServerFnError> {
    Ok(crate::backend::backend()?.products().await?)
}

#[server(prefix = "/_fn", endpoint = "get_cart")]
pub async fn get_cart() -> Result<Cart, ServerFnError> {
    let session = crate::backend::session().await?;
    Ok(crate::backend::backend()?.cart(session).await?)
}

#[server(prefix = "/_fn", endpoint = "add_to_cart")]
pub async fn add_to_cart(sku: String, quantity: u32) -> Result<Cart, ServerFnError> {
    let session = crate::backend::session().await?;
    Ok(crate::backend::backend()?.add_to_cart(session, sku, quantity).await?)
}
