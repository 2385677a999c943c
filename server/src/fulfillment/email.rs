//! The order confirmation email: rendered with askama (HTML and plain text) when the order
//! ships, and queued in `emails` in the same transaction. `emails_one_per_order_and_kind`
//! makes a second queueing impossible; the mailer delivers what is queued.

use askama::Template;
use axum::{
    extract::{Path, State},
    http::header,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use domain::format_money;

use crate::{error::ApiError, session::Shopper, state::AppState};

/// `GET /orders/{id}/email`: the order's confirmation email as the shopper received it.
pub fn router() -> Router<AppState> {
    Router::new().route("/orders/{id}/email", get(show))
}

async fn show(
    State(db): State<PgPool>,
    shopper: Shopper,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound)?;
    let html = sqlx::query_scalar!(
        "SELECT e.html_body FROM emails e JOIN orders o ON o.id = e.order_id
          WHERE o.id = $1 AND o.session_id = $2 AND e.kind = $3",
        id,
        shopper.id,
        ORDER_CONFIRMATION,
    )
    .fetch_optional(&db)
    .await?;
    let html = html.ok_or(ApiError::NotFound)?;
    // Shown on the shop's own origin: sandboxed, so no script in it could ever run here.
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, "sandbox"),
        ],
        html,
    )
        .into_response())
}

pub const ORDER_CONFIRMATION: &str = "order_confirmation";

pub struct Line {
    pub name: String,
    pub quantity: i32,
    pub amount: String,
}

#[derive(Template)]
#[template(path = "emails/order_confirmation.html")]
pub struct ConfirmationHtml<'a> {
    pub subject: &'a str,
    pub order_no: &'a str,
    pub shipment_no: &'a str,
    pub lines: &'a [Line],
    pub total: &'a str,
}

#[derive(Template)]
#[template(path = "emails/order_confirmation.txt")]
pub struct ConfirmationText<'a> {
    pub order_no: &'a str,
    pub shipment_no: &'a str,
    pub lines: &'a [Line],
    pub total: &'a str,
}

struct OrderFacts {
    order_no: String,
    currency: String,
    total_cents: i64,
}

/// Renders the confirmation for `order_id` and queues it (once: a second call does nothing).
pub async fn queue_confirmation(
    tx: &mut PgConnection,
    order_id: Uuid,
    shipment_no: &str,
) -> Result<(), anyhow::Error> {
    let order = sqlx::query_as!(
        OrderFacts,
        "SELECT order_no, currency, total_cents FROM orders WHERE id = $1",
        order_id
    )
    .fetch_one(&mut *tx)
    .await?;
    let lines = sqlx::query!(
        "SELECT name, quantity, unit_price_cents FROM order_items WHERE order_id = $1 ORDER BY line_no",
        order_id
    )
    .fetch_all(&mut *tx)
    .await?;
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|line| Line {
            amount: format_money(
                line.unit_price_cents * i64::from(line.quantity),
                &order.currency,
            ),
            name: line.name,
            quantity: line.quantity,
        })
        .collect();
    let total = format_money(order.total_cents, &order.currency);
    let subject = format!("Your order {} has shipped", order.order_no);
    let html = ConfirmationHtml {
        subject: &subject,
        order_no: &order.order_no,
        shipment_no,
        lines: &lines,
        total: &total,
    }
    .render()?;
    let text = ConfirmationText {
        order_no: &order.order_no,
        shipment_no,
        lines: &lines,
        total: &total,
    }
    .render()?;
    sqlx::query!(
        "INSERT INTO emails (id, order_id, kind, recipient, subject, html_body, text_body)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT ON CONSTRAINT emails_one_per_order_and_kind DO NOTHING",
        Uuid::new_v4(),
        order_id,
        ORDER_CONFIRMATION,
        recipient(&order.order_no),
        subject,
        html,
        text,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Orders carry no email address yet, so confirmations go to a per-order address of the
/// sandbox domain (`.test` never leaves the machine); a mail catcher shows them.
fn recipient(order_no: &str) -> String {
    format!("order-{}@shoppers.once.test", order_no.to_ascii_lowercase())
}
