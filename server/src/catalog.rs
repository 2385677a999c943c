//! The catalog: products with prices and stock, read from the database.

use axum::{extract::State, Json};
use sqlx::PgPool;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{error::ApiError, state::AppState};
use app::dto::Product;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every product, with its price (in cents) and the stock left
#[utoipa::path(
    get,
    path = "/products",
    tag = "catalog",
    responses((status = 200, description = "The catalog, by sku.", body = Vec<Product>)),
)]
async fn list(State(db): State<PgPool>) -> Result<Json<Vec<Product>>, ApiError> {
    Ok(Json(all_products(&db).await?))
}

#[derive(sqlx::FromRow)]
struct ProductRow {
    sku: String,
    name: String,
    description: String,
    price_cents: i64,
    currency: String,
    stock: i32,
}

impl From<ProductRow> for Product {
    fn from(r: ProductRow) -> Self {
        Product {
            sku: r.sku,
            name: r.name,
            description: r.description,
            price_cents: r.price_cents,
            currency: r.currency,
            stock: r.stock,
        }
    }
}

pub async fn all_products(db: &PgPool) -> Result<Vec<Product>, sqlx::Error> {
    let rows: Vec<ProductRow> = sqlx::query_as(
        "SELECT sku, name, description, price_cents, currency, stock FROM products ORDER BY sku",
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Product::from).collect())
}

pub async fn products_by_sku(db: &PgPool, skus: &[String]) -> Result<Vec<Product>, sqlx::Error> {
    let rows: Vec<ProductRow> = sqlx::query_as(
        "SELECT sku, name, description, price_cents, currency, stock FROM products WHERE sku = ANY($1)",
    )
    .bind(skus)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Product::from).collect())
}
