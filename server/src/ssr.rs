//! Hosting the Leptos app: server-side rendering, server functions and the static site,
//! plus the [`ShopBackend`] the UI's server functions call.

use std::sync::Arc;

use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use sqlx::PgPool;
use tower_sessions::Session;

use app::{
    backend::{Backend, BackendError, BoxFuture, ShopBackend},
    dto::{Cart, Product},
    shell, App,
};

use crate::{cart, catalog, startup::AppState};

/// The page routes and server functions, with the backend in every request's context.
pub fn router(state: &AppState) -> Router<AppState> {
    let backend = Backend(Arc::new(ServerBackend { db: state.db.clone() }));
    let options = state.leptos.clone();
    Router::new()
        .leptos_routes_with_context(
            state,
            generate_route_list(App),
            move || provide_context(backend.clone()),
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
}

struct ServerBackend {
    db: PgPool,
}

impl ShopBackend for ServerBackend {
    fn products(&self) -> BoxFuture<'_, Result<Vec<Product>, BackendError>> {
        Box::pin(async move { catalog::all_products(&self.db).await.map_err(internal) })
    }

    fn cart(&self, session: Session) -> BoxFuture<'_, Result<Cart, BackendError>> {
        Box::pin(async move { cart::read(&self.db, &session).await.map_err(shown) })
    }

    fn add_to_cart(&self, session: Session, sku: String, quantity: u32) -> BoxFuture<'_, Result<Cart, BackendError>> {
        Box::pin(async move { cart::add(&self.db, &session, sku, quantity).await.map_err(shown) })
    }
}

fn internal(e: impl std::fmt::Display) -> BackendError {
    tracing::error!(error = %e, "backend call failed");
    BackendError { message: "Something went wrong on our side. Please try again.".into() }
}

fn shown(e: cart::CartError) -> BackendError {
    match e {
        cart::CartError::Storage(inner) => internal(inner),
        other => BackendError { message: other.to_string() },
    }
}
