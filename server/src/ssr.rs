//! Hosting the Leptos app: server-side rendering, server functions and the static site,
//! plus the [`ShopBackend`] the UI's server functions call.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::Uri,
    Router,
};
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use sqlx::PgPool;
use tower_sessions::Session;
use uuid::Uuid;

use app::{
    backend::{Backend, BackendError, BoxFuture, ShopBackend},
    shell, App,
};
use domain::{details::DetailsDraft, CardEntry, Cart, Checkout, Order, Product};

use crate::{
    assets, cart, catalog, checkout_details, config::ProviderChoice, orders, page_deadline,
    payments, refusals, session, state::AppState,
};

/// The page routes and server functions, with the backend in every request's context; any
/// other path is a file of the site's assets or the 404 page.
pub fn router(state: &AppState) -> Router<AppState> {
    let backend = Backend(Arc::new(ServerBackend {
        db: state.db.clone(),
        key_retention: state.config.idempotency_retention,
        cart_adds_per_hour: state.config.limits.cart_adds_per_hour,
        card_entry: card_entry(&state.config.payment_provider),
    }));
    let options = (*state.leptos).clone();
    // Shared, not copied, into every page's context.
    let site = state.site.clone();
    let page_context = move || {
        provide_context(site.clone());
        provide_request_nonce();
    };
    Router::new()
        .leptos_routes_with_context(
            state,
            generate_route_list(App),
            {
                let page_context = page_context.clone();
                move || {
                    provide_context(backend.clone());
                    page_context();
                }
            },
            move || shell(options.clone()),
        )
        .fallback(files_or_not_found(page_context))
        .layer(axum::middleware::from_fn(page_deadline::rerender_stalled))
        .layer(axum::middleware::from_fn_with_state(
            refusals::ServerFnBodyLimit(state.config.max_body_bytes),
            refusals::server_fn_bodies,
        ))
}

/// Any other path: a file of the site (the favicon), else the 404 page. A path that could
/// name no file (`assets::could_name_a_file`) is not looked up at all, so the file system's
/// refusal of it is neither a 500 nor an ERROR line in the log.
fn files_or_not_found(
    page_context: impl Fn() + Clone + Send + 'static,
) -> impl Fn(Uri, State<AppState>, Request) -> BoxedResponse + Clone + Send + 'static {
    let files_or_pages =
        leptos_axum::file_and_error_handler_with_context::<AppState, _>(page_context, shell);
    move |uri: Uri, state: State<AppState>, request: Request| {
        let looked_up = if assets::could_name_a_file(uri.path()) {
            uri
        } else {
            Uri::from_static("/.no-such-file")
        };
        files_or_pages(looked_up, state, request)
    }
}

type BoxedResponse =
    std::pin::Pin<Box<dyn std::future::Future<Output = axum::response::Response> + Send>>;

/// Gives Leptos the nonce the policy header names (`headers::protective` made it), so its
/// inline hydration scripts carry it; without one, Leptos would make its own, which the
/// header would not allow.
fn provide_request_nonce() {
    let nonce = use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<crate::headers::CspNonce>().cloned());
    if let Some(nonce) = nonce {
        provide_context(leptos::nonce::Nonce::from_value(nonce.0));
    }
}

struct ServerBackend {
    db: PgPool,
    key_retention: std::time::Duration,
    cart_adds_per_hour: u32,
    card_entry: CardEntry,
}

/// How the payment form takes the card with `provider`.
fn card_entry(provider: &ProviderChoice) -> CardEntry {
    match provider {
        ProviderChoice::Sandbox => CardEntry::CardNumber,
        ProviderChoice::Stripe(stripe) => CardEntry::StripeJs {
            js_url: stripe.js_url.clone(),
            publishable_key: stripe.publishable_key.clone(),
        },
    }
}

impl ShopBackend for ServerBackend {
    fn products(&self) -> BoxFuture<'_, Result<Vec<Product>, BackendError>> {
        Box::pin(async move { catalog::all_products(&self.db).await.map_err(storage) })
    }

    fn cart(&self, session: Session) -> BoxFuture<'_, Result<Cart, BackendError>> {
        Box::pin(async move {
            match existing_session_id(&session).await? {
                Some(id) => cart::read(&self.db, &id).await.map_err(storage),
                None => Ok(Cart::default()),
            }
        })
    }

    fn add_to_cart(
        &self,
        session: Session,
        sku: String,
        quantity: i64,
        add_key: String,
    ) -> BoxFuture<'_, Result<Cart, BackendError>> {
        Box::pin(async move {
            let id = session_for_write(&session).await?;
            let quantity =
                u32::try_from(quantity).map_err(|_| shown(cart::CartError::BadQuantity))?;
            cart::add(
                &self.db,
                &id,
                &sku,
                quantity,
                &add_key,
                self.cart_adds_per_hour,
            )
            .await
            .map_err(shown)
        })
    }

    fn set_cart_quantity(
        &self,
        session: Session,
        sku: String,
        quantity: i64,
    ) -> BoxFuture<'_, Result<Cart, BackendError>> {
        Box::pin(async move {
            let id = session_for_write(&session).await?;
            let change = match u32::try_from(quantity) {
                Ok(0) => cart::LineChange::Remove,
                Ok(n) => cart::LineChange::SetQuantity(n),
                Err(_) => return Err(shown(cart::CartError::BadQuantity)),
            };
            cart::change_line(&self.db, &id, &sku, change)
                .await
                .map_err(shown)
        })
    }

    /// The cart with its checkout key: the same key on every render of the same cart.
    fn checkout(&self, session: Session) -> BoxFuture<'_, Result<Checkout, BackendError>> {
        Box::pin(async move {
            let Some(id) = existing_session_id(&session).await? else {
                return Ok(Checkout {
                    cart: Cart::default(),
                    key: cart::fresh_key(),
                    key_retention_secs: self.key_retention_secs(),
                    details: DetailsDraft::default(),
                });
            };
            let cart = cart::read(&self.db, &id).await.map_err(storage)?;
            let key = cart::checkout_key(&self.db, &id).await.map_err(shown)?;
            let details = checkout_details::read(&self.db, &id)
                .await
                .map_err(storage)?;
            Ok(Checkout {
                cart,
                key,
                key_retention_secs: self.key_retention_secs(),
                details,
            })
        })
    }

    fn save_checkout_details(
        &self,
        session: Session,
        details: DetailsDraft,
    ) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let Some(id) = existing_session_id(&session).await? else {
                return Ok(());
            };
            checkout_details::save(&self.db, &id, &details)
                .await
                .map_err(storage)?;
            Ok(())
        })
    }

    fn fresh_key(&self) -> String {
        cart::fresh_key()
    }

    fn key_retention_secs(&self) -> u64 {
        self.key_retention.as_secs()
    }

    fn card_entry(&self) -> CardEntry {
        self.card_entry.clone()
    }

    fn order(
        &self,
        session: Session,
        id: Uuid,
    ) -> BoxFuture<'_, Result<Option<Order>, BackendError>> {
        Box::pin(async move {
            let Some(session_id) = session.id() else {
                return Ok(None);
            };
            orders::store::find(&self.db, &session_id.to_string(), id)
                .await
                .map_err(storage)
        })
    }

    fn orders(&self, session: Session) -> BoxFuture<'_, Result<Vec<Order>, BackendError>> {
        Box::pin(async move {
            let Some(session_id) = session.id() else {
                return Ok(Vec::new());
            };
            orders::store::for_session(&self.db, &session_id.to_string())
                .await
                .map_err(storage)
        })
    }

    fn payment_awaiting_bank(
        &self,
        session: Session,
        order_id: Uuid,
    ) -> BoxFuture<'_, Result<Option<Uuid>, BackendError>> {
        Box::pin(async move {
            let Some(session_id) = session.id() else {
                return Ok(None);
            };
            let payments = payments::store::for_order(&self.db, &session_id.to_string(), order_id)
                .await
                .map_err(storage)?;
            Ok(payments
                .into_iter()
                .flatten()
                .find(|p| p.needs_authentication)
                .map(|p| p.id))
        })
    }
}

/// The session a server-function call names, if the store knows it. Calls never open one:
/// they are POSTs, and a session opened by a POST that another site sent would replace the
/// shopper's own (see `session::no_cookie_from_writes`). Pages are GETs, which open it.
async fn existing_session_id(session: &Session) -> Result<Option<String>, BackendError> {
    session::existing_id(session)
        .await
        .map_err(|e| BackendError {
            unavailable: matches!(e, crate::error::ApiError::Unavailable(_)),
            ..internal(e)
        })
}

/// A change of the cart needs the session the page was shown in.
async fn session_for_write(session: &Session) -> Result<String, BackendError> {
    existing_session_id(session).await?.ok_or(BackendError {
        message: app::messages::SESSION_ENDED,
        refused: true,
        unavailable: false,
    })
}

fn internal(e: impl std::fmt::Display) -> BackendError {
    tracing::error!(error = %e, "backend call failed");
    BackendError {
        message: app::messages::OUR_FAILURE,
        refused: false,
        unavailable: false,
    }
}

/// A database error: a lost connection or a busy database is worth trying again (503),
/// and makes the pool check its connections (`db::note_lost_connection`).
fn storage(e: sqlx::Error) -> BackendError {
    crate::db::note_lost_connection(&e);
    BackendError {
        unavailable: once_events::db_error::is_transient(&e),
        ..internal(e)
    }
}

fn shown(e: cart::CartError) -> BackendError {
    match e {
        cart::CartError::Storage(inner) => storage(inner),
        other => BackendError {
            message: other.code(),
            refused: true,
            unavailable: false,
        },
    }
}
