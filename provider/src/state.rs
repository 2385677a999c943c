//! The state every route of the provider shares, in a module of its own: the route modules
//! import it from here, and only `startup` builds it.

use axum::extract::FromRef;
use sqlx::PgPool;

use crate::settings::SharedSettings;

#[derive(Clone, FromRef)]
pub struct ProviderState {
    pub db: PgPool,
    pub settings: SharedSettings,
}
