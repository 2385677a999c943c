//! The cart lives in the shopper's session (so it survives reloads and restarts) as a list
//! of (sku, quantity); prices are looked up in the catalog whenever the cart is read.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tower_sessions::Session;

use app::dto::{Cart, CartLine};

use crate::catalog;

const CART: &str = "cart";
pub const MAX_QUANTITY: u32 = 99;
pub const MAX_LINES: usize = 20;

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoredCart(Vec<(String, u32)>);

#[derive(Debug, thiserror::Error)]
pub enum CartError {
    #[error("there is no product {0}")]
    UnknownSku(String),
    #[error("a quantity must be between 1 and {MAX_QUANTITY}")]
    BadQuantity,
    #[error("a cart holds at most {MAX_LINES} different products")]
    TooManyLines,
    #[error("the cart could not be read or saved")]
    Storage(#[from] anyhow::Error),
}

pub async fn read(db: &PgPool, session: &Session) -> Result<Cart, CartError> {
    let stored = load(session).await?;
    let skus: Vec<String> = stored.0.iter().map(|(sku, _)| sku.clone()).collect();
    let products = catalog::products_by_sku(db, &skus)
        .await
        .map_err(anyhow::Error::from)?;
    let lines = stored
        .0
        .into_iter()
        .filter_map(|(sku, quantity)| {
            let p = products.iter().find(|p| p.sku == sku)?;
            Some(CartLine {
                sku,
                name: p.name.clone(),
                quantity,
                unit_price_cents: p.price_cents,
                currency: p.currency.clone(),
            })
        })
        .collect();
    Ok(Cart { lines })
}

pub async fn add(
    db: &PgPool,
    session: &Session,
    sku: String,
    quantity: u32,
) -> Result<Cart, CartError> {
    if !(1..=MAX_QUANTITY).contains(&quantity) {
        return Err(CartError::BadQuantity);
    }
    if catalog::products_by_sku(db, std::slice::from_ref(&sku))
        .await
        .map_err(anyhow::Error::from)?
        .is_empty()
    {
        return Err(CartError::UnknownSku(sku));
    }
    let mut stored = load(session).await?;
    let lines = stored.0.len();
    match stored.0.iter_mut().find(|(s, _)| *s == sku) {
        Some((_, q)) => *q = (*q + quantity).min(MAX_QUANTITY),
        None if lines >= MAX_LINES => return Err(CartError::TooManyLines),
        None => stored.0.push((sku, quantity)),
    }
    session
        .insert(CART, &stored)
        .await
        .map_err(anyhow::Error::from)?;
    read(db, session).await
}

pub async fn clear(session: &Session) -> Result<(), CartError> {
    session
        .remove::<StoredCart>(CART)
        .await
        .map_err(anyhow::Error::from)?;
    Ok(())
}

async fn load(session: &Session) -> Result<StoredCart, CartError> {
    Ok(session
        .get::<StoredCart>(CART)
        .await
        .map_err(anyhow::Error::from)?
        .unwrap_or_default())
}
