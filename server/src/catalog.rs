//! The catalog: products with prices and stock, read from the database.

use axum::{extract::State, Json};
use sqlx::PgPool;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{error::ApiError, state::AppState};
use domain::Product;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every product, with its price (in cents) and the stock left
#[utoipa::path(
    get,
    path = "/products",
    operation_id = "list_products",
    tag = "catalog",
    responses((status = 200, description = "The catalog, by sku.", body = Vec<Product>)),
)]
async fn list(State(db): State<PgPool>) -> Result<Json<Vec<Product>>, ApiError> {
    Ok(Json(all_products(&db).await?))
}

// `query_as!` fills `Product` field by field: the shared DTO needs no sqlx trait.
pub async fn all_products(db: &PgPool) -> Result<Vec<Product>, sqlx::Error> {
    sqlx::query_as!(
        Product,
        "SELECT sku, name, description, price_cents, currency, stock FROM products ORDER BY sku",
    )
    .fetch_all(db)
    .await
}

/// Whether `sku` is written the way the catalog writes skus (letters, digits and `-`, 1 to
/// 64 of them). Anything else names no product and is refused before it reaches the
/// database, which would answer bytes such as NUL with an error of its own.
pub fn is_plausible_sku(sku: &str) -> bool {
    (1..=64).contains(&sku.len()) && sku.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

pub async fn products_by_sku(db: &PgPool, skus: &[String]) -> Result<Vec<Product>, sqlx::Error> {
    sqlx::query_as!(
        Product,
        "SELECT sku, name, description, price_cents, currency, stock FROM products WHERE sku = ANY($1)",
        skus,
    )
    .fetch_all(db)
    .await
}
