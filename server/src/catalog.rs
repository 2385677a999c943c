//! The catalog: products with prices and stock, read from the database.

use axum::{extract::State, routing::get, Json, Router};
use sqlx::PgPool;

use crate::{error::ApiError, state::AppState};
use app::dto::Product;

pub fn router() -> Router<AppState> {
    Router::new().route("/products", get(list))
}

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
