//! The seam between the UI and the server: what server functions may ask for. The `server`
//! crate implements [`ShopBackend`] and provides a [`Backend`] through Leptos context, so the
//! UI never touches SQL or server internals.

use std::{future::Future, pin::Pin, sync::Arc};

use leptos::prelude::*;
use tower_sessions::Session;

use domain::{details::DetailsDraft, CardEntry, Cart, Checkout, Order, Product};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A failure the UI may show: `message` is a code of [`crate::messages`], whose text the
/// page shows (the server logged the rest).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub message: &'static str,
    /// The shopper's request was refused (a 4xx), rather than the server failing (a 500).
    pub refused: bool,
    /// The database was away or busy: worth trying again (a 503).
    pub unavailable: bool,
}

pub trait ShopBackend: Send + Sync + 'static {
    fn products(&self) -> BoxFuture<'_, Result<Vec<Product>, BackendError>>;
    fn cart(&self, session: Session) -> BoxFuture<'_, Result<Cart, BackendError>>;
    /// Adds to the cart once per `add_key` (a repeated key adds nothing).
    fn add_to_cart(
        &self,
        session: Session,
        sku: String,
        quantity: i64,
        add_key: String,
    ) -> BoxFuture<'_, Result<Cart, BackendError>>;
    /// Sets a line's quantity; `0` takes the line out.
    fn set_cart_quantity(
        &self,
        session: Session,
        sku: String,
        quantity: i64,
    ) -> BoxFuture<'_, Result<Cart, BackendError>>;
    /// The cart plus its checkout Idempotency-Key: the same key for the same cart until its
    /// intent ends (an order, a refusal, a change of the cart).
    fn checkout(&self, session: Session) -> BoxFuture<'_, Result<Checkout, BackendError>>;
    /// Keeps the shopper's details as typed with the cart, so that a reload shows them again
    /// (nothing is kept without a cart). Saving is idempotent: no key.
    fn save_checkout_details(
        &self,
        session: Session,
        details: DetailsDraft,
    ) -> BoxFuture<'_, Result<(), BackendError>>;
    /// A new Idempotency-Key for a form the server renders.
    fn fresh_key(&self) -> String;
    /// How long the server keeps an Idempotency-Key, in seconds.
    fn key_retention_secs(&self) -> u64;
    /// How the payment form takes the card (the shop's payment provider decides).
    fn card_entry(&self) -> CardEntry;
    fn order(
        &self,
        session: Session,
        id: uuid::Uuid,
    ) -> BoxFuture<'_, Result<Option<Order>, BackendError>>;
    fn orders(&self, session: Session) -> BoxFuture<'_, Result<Vec<Order>, BackendError>>;
    /// The order's payment attempt that waits for the shopper's bank (3-D Secure), if any.
    fn payment_awaiting_bank(
        &self,
        session: Session,
        order_id: uuid::Uuid,
    ) -> BoxFuture<'_, Result<Option<uuid::Uuid>, BackendError>>;
}

#[derive(Clone)]
pub struct Backend(pub Arc<dyn ShopBackend>);

/// The backend the server provided for this request.
pub fn backend() -> Result<Arc<dyn ShopBackend>, ServerFnError> {
    use_context::<Backend>()
        .map(|b| b.0)
        .ok_or_else(|| ServerFnError::new("the shop backend is not available"))
}

/// The shopper's session, as the server's session layer attached it to the request.
pub async fn session() -> Result<Session, ServerFnError> {
    leptos_axum::extract::<Session>()
        .await
        .map_err(|_| ServerFnError::new("no session"))
}
