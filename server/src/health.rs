//! `GET /healthz`: 200 when the database answers, 503 otherwise.

use axum::{extract::State, http::StatusCode, response::IntoResponse, Json};
use serde_json::json;
use sqlx::PgPool;

pub async fn healthz(State(db): State<PgPool>) -> impl IntoResponse {
    match sqlx::query_scalar!("SELECT 1").fetch_one(&db).await {
        Ok(_) => (
            StatusCode::OK,
            Json(json!({ "status": "ok", "database": "up" })),
        ),
        Err(e) => {
            crate::db::note_lost_connection(&e);
            tracing::warn!(error = %e, "health check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "database": "down" })),
            )
        }
    }
}
