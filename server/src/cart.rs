//! The cart, in the database and keyed by the shopper's session (so it survives reloads,
//! restarts and a move to another instance), with the Idempotency-Key of its checkout.
//!
//! Two rules keep a cart from becoming a second order (docs/design.md, "The cart"):
//! * the transaction that creates an order takes its lines out of the session's cart
//!   ([`take_ordered`]), so an order and the full cart that produced it never exist together;
//! * the cart carries one checkout key from its first line until its intent ends (an order,
//!   a definitive refusal, or a change of the cart): every checkout page, reload or retry
//!   of the same cart submits under the same key.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use domain::{Cart, CartLine};

pub const MAX_QUANTITY: u32 = domain::MAX_QUANTITY;
pub const MAX_LINES: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum CartError {
    #[error("There is no product {0} in the shop.")]
    UnknownSku(String),
    #[error("A quantity must be between 1 and {MAX_QUANTITY}.")]
    BadQuantity,
    #[error("A cart holds at most {MAX_LINES} different products.")]
    TooManyLines,
    #[error("The form was incomplete. Please reload the page and try again.")]
    BadAddKey,
    #[error("That product is no longer in your cart.")]
    NotInCart,
    #[error("The session added to its cart as often as it may in an hour.")]
    OverQuota,
    #[error("the cart could not be read or saved")]
    Storage(#[from] sqlx::Error),
}

impl CartError {
    /// The code of the words a page shows for it (`app::messages`).
    pub fn code(&self) -> &'static str {
        use app::messages::*;
        match self {
            Self::UnknownSku(_) => UNKNOWN_PRODUCT,
            Self::BadQuantity => BAD_QUANTITY,
            Self::TooManyLines => TOO_MANY_LINES,
            Self::BadAddKey => FORM_INCOMPLETE,
            Self::NotInCart => NOT_IN_CART,
            Self::OverQuota => CART_ADD_QUOTA,
            Self::Storage(_) => OUR_FAILURE,
        }
    }
}

/// The session's cart, priced from the catalog now, with what is in stock now.
pub async fn read(db: &PgPool, session_id: &str) -> Result<Cart, sqlx::Error> {
    let lines = sqlx::query!(
        "SELECT l.sku, p.name, l.quantity, p.price_cents, p.currency, p.stock
           FROM cart_lines l JOIN products p ON p.sku = l.sku
          WHERE l.session_id = $1 ORDER BY l.added_at, l.sku",
        session_id,
    )
    .fetch_all(db)
    .await?;
    let lines = lines
        .into_iter()
        .map(|line| CartLine {
            sku: line.sku,
            name: line.name,
            quantity: line.quantity as u32,
            unit_price_cents: line.price_cents,
            currency: line.currency,
            in_stock: line.stock.max(0) as u32,
        })
        .collect();
    Ok(Cart { lines })
}

/// The key of the cart's checkout intent, if the session has a cart.
pub async fn current_key(db: &PgPool, session_id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT checkout_key FROM carts WHERE session_id = $1",
        session_id
    )
    .fetch_optional(db)
    .await
}

/// The cart's checkout key, with the cart row locked until the caller's transaction ends:
/// no change to the cart (which would change the key) can slip in meanwhile.
pub async fn lock_key(
    tx: &mut PgConnection,
    session_id: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT checkout_key FROM carts WHERE session_id = $1 FOR UPDATE",
        session_id
    )
    .fetch_optional(tx)
    .await
}

/// The key of the cart's checkout intent; a throwaway key when there is no cart.
pub async fn checkout_key(db: &PgPool, session_id: &str) -> Result<String, CartError> {
    Ok(current_key(db, session_id).await?.unwrap_or_else(fresh_key))
}

/// Adds `quantity` of `sku` (capped at the maximum), once per `add_key`: an add whose key
/// was seen already (a double click, a re-posted form) adds nothing. A changed cart is a new
/// intent, so it gets a new checkout key: the old key's request named the old cart.
pub async fn add(
    db: &PgPool,
    session_id: &str,
    sku: &str,
    quantity: u32,
    add_key: &str,
    adds_per_hour: u32,
) -> Result<Cart, CartError> {
    check_quantity(quantity)?;
    check_sku(sku)?;
    if add_key.is_empty() || add_key.len() > 255 || add_key.chars().any(char::is_control) {
        return Err(CartError::BadAddKey);
    }
    let mut tx = db.begin().await?;
    if adds_per_hour > 0 {
        crate::session::hold_for_quota(&mut tx, session_id).await?;
    }
    // Recorded only while the session is under its hourly quota of adds, counted up to the
    // quota (so the count costs no more than that).
    let first = sqlx::query!(
        "INSERT INTO cart_adds (session_id, add_key)
         SELECT $1, $2 WHERE $3::bigint = 0 OR (SELECT count(*) FROM (
           SELECT 1 FROM cart_adds WHERE session_id = $1 AND added_at > now() - interval '1 hour' LIMIT $3
         ) AS capped) < $3
         ON CONFLICT ON CONSTRAINT cart_adds_pkey DO NOTHING",
        session_id,
        add_key,
        i64::from(adds_per_hour),
    )
    .execute(&mut *tx)
    .await?;
    if first.rows_affected() == 0 {
        drop(tx);
        if !add_seen(db, session_id, add_key).await? {
            return Err(CartError::OverQuota);
        }
        return Ok(read(db, session_id).await?);
    }
    start_new_intent(&mut tx, session_id).await?;
    let lines = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM cart_lines WHERE session_id = $1 AND sku <> $2"#,
        session_id,
        sku,
    )
    .fetch_one(&mut *tx)
    .await?;
    if lines >= MAX_LINES as i64 {
        return Err(CartError::TooManyLines);
    }
    let added = sqlx::query!(
        "INSERT INTO cart_lines (session_id, sku, quantity)
         SELECT $1, sku, $3 FROM products WHERE sku = $2
         ON CONFLICT ON CONSTRAINT cart_lines_pkey
         DO UPDATE SET quantity = least(cart_lines.quantity + EXCLUDED.quantity, $4)",
        session_id,
        sku,
        (quantity as i32),
        (MAX_QUANTITY as i32),
    )
    .execute(&mut *tx)
    .await?;
    if added.rows_affected() == 0 {
        return Err(CartError::UnknownSku(sku.to_owned()));
    }
    tx.commit().await?;
    Ok(read(db, session_id).await?)
}

/// Whether an add with `add_key` was recorded for the session (a repeat adds nothing).
async fn add_seen(db: &PgPool, session_id: &str, add_key: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM cart_adds WHERE session_id = $1 AND add_key = $2) AS "seen!""#,
        session_id,
        add_key,
    )
    .fetch_one(db)
    .await
}

/// A change to a line already in the cart. Both are idempotent (a quantity is set, not
/// added), so they need no key.
#[derive(Clone, Copy, Debug)]
pub enum LineChange {
    SetQuantity(u32),
    Remove,
}

/// Applies `change` to the `sku` line of the session's cart. A cart that changed starts a
/// new checkout intent; a cart left empty goes.
pub async fn change_line(
    db: &PgPool,
    session_id: &str,
    sku: &str,
    change: LineChange,
) -> Result<Cart, CartError> {
    if let LineChange::SetQuantity(quantity) = change {
        check_quantity(quantity)?;
    }
    check_sku(sku)?;
    let mut tx = db.begin().await?;
    if lock_key(&mut tx, session_id).await?.is_none() {
        return match change {
            LineChange::SetQuantity(_) => Err(CartError::NotInCart),
            LineChange::Remove => Ok(read(db, session_id).await?),
        };
    }
    let changed = match change {
        LineChange::SetQuantity(quantity) => sqlx::query!(
            "UPDATE cart_lines SET quantity = $3
              WHERE session_id = $1 AND sku = $2 AND quantity <> $3",
            session_id,
            sku,
            (quantity as i32),
        ),
        LineChange::Remove => sqlx::query!(
            "DELETE FROM cart_lines WHERE session_id = $1 AND sku = $2",
            session_id,
            sku,
        ),
    }
    .execute(&mut *tx)
    .await?;
    if changed.rows_affected() > 0 {
        start_new_intent(&mut tx, session_id).await?;
        drop_if_empty(&mut tx, session_id).await?;
    } else if matches!(change, LineChange::SetQuantity(_))
        && !has_line(&mut tx, session_id, sku).await?
    {
        return Err(CartError::NotInCart);
    }
    tx.commit().await?;
    Ok(read(db, session_id).await?)
}

async fn has_line(tx: &mut PgConnection, session_id: &str, sku: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM cart_lines WHERE session_id = $1 AND sku = $2) AS "exists!""#,
        session_id,
        sku,
    )
    .fetch_one(tx)
    .await
}

/// A sku as the catalog writes them; anything else names no product.
fn check_sku(sku: &str) -> Result<(), CartError> {
    if crate::catalog::is_plausible_sku(sku) {
        Ok(())
    } else {
        let shown: String = sku.chars().filter(|c| !c.is_control()).take(64).collect();
        Err(CartError::UnknownSku(shown))
    }
}

fn check_quantity(quantity: u32) -> Result<(), CartError> {
    if (1..=MAX_QUANTITY).contains(&quantity) {
        Ok(())
    } else {
        Err(CartError::BadQuantity)
    }
}

/// Gives the session's cart (created if missing) a new checkout key: a new intent.
async fn start_new_intent(tx: &mut PgConnection, session_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO carts (session_id, checkout_key) VALUES ($1, $2)
         ON CONFLICT ON CONSTRAINT carts_pkey
         DO UPDATE SET checkout_key = EXCLUDED.checkout_key, updated_at = now()",
        session_id,
        fresh_key(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A cart without lines goes (its key with it).
async fn drop_if_empty(tx: &mut PgConnection, session_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM carts WHERE session_id = $1
            AND NOT EXISTS (SELECT 1 FROM cart_lines WHERE session_id = $1)",
        session_id,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Forgets the keys of adds older than `retention` (the idempotency keys' window).
pub async fn forget_old_adds(
    db: &PgPool,
    retention: std::time::Duration,
) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!(
        "DELETE FROM cart_adds WHERE added_at < now() - $1::bigint * interval '1 millisecond'",
        (retention.as_millis() as i64),
    )
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}

/// Takes what was just ordered out of the session's cart and ends its checkout intent,
/// inside the caller's transaction: the order's own. Usually that empties the cart; what
/// was added meanwhile (another tab) stays, under a new key, since it was never ordered.
pub async fn take_ordered(
    tx: &mut PgConnection,
    session_id: &str,
    skus: &[String],
    quantities: &[i32],
) -> Result<(), sqlx::Error> {
    // The cart row first, as `add` and `change_line` lock it before any line: a concurrent
    // change waits for the order (no deadlock), and what it adds is seen by the statements
    // below, never deleted.
    let cart = sqlx::query_scalar!(
        "SELECT 1 FROM carts WHERE session_id = $1 FOR UPDATE",
        session_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    // No cart (an API client's order): no lines either, as a line cannot outlive its cart.
    if cart.is_none() {
        return Ok(());
    }
    sqlx::query!(
        "WITH ordered AS (SELECT * FROM unnest($2::text[], $3::int[]) AS o(sku, quantity)),
              reduced AS (
                UPDATE cart_lines l SET quantity = l.quantity - o.quantity FROM ordered o
                 WHERE l.session_id = $1 AND l.sku = o.sku AND l.quantity > o.quantity)
         DELETE FROM cart_lines l USING ordered o
          WHERE l.session_id = $1 AND l.sku = o.sku AND l.quantity <= o.quantity",
        session_id,
        skus,
        quantities,
    )
    .execute(&mut *tx)
    .await?;
    // A cart left empty goes; one with lines left starts a new intent.
    drop_if_empty(&mut *tx, session_id).await?;
    sqlx::query!(
        "UPDATE carts SET checkout_key = $2, updated_at = now() WHERE session_id = $1",
        session_id,
        fresh_key(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Ends the checkout intent of `key` after a definitive refusal, in the transaction that
/// stores the refusal: the next submit of this cart is a new request, not a replay of the
/// refusal. Does nothing when the cart has moved on to another key.
pub async fn end_intent(
    tx: &mut PgConnection,
    session_id: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE carts SET checkout_key = $3, updated_at = now()
          WHERE session_id = $1 AND checkout_key = $2",
        session_id,
        key,
        fresh_key(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

pub fn fresh_key() -> String {
    Uuid::new_v4().to_string()
}
