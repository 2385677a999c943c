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
use std::collections::HashMap;

use once_events::HandlerError;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use domain::{details::ShippingAddress, format_money};

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
    pub recipient: &'a str,
    /// The shipping address, one line each; empty for an order placed without one.
    pub ship_to: &'a [String],
    pub order_no: &'a str,
    pub shipment_no: &'a str,
    pub lines: &'a [Line],
    pub total: &'a str,
}

#[derive(Template)]
#[template(path = "emails/order_confirmation.txt")]
pub struct ConfirmationText<'a> {
    pub order_no: &'a str,
    pub ship_to: &'a [String],
    pub shipment_no: &'a str,
    pub lines: &'a [Line],
    pub total: &'a str,
}

struct OrderFacts {
    id: Uuid,
    order_no: String,
    currency: String,
    total_cents: i64,
    /// The shopper's (`order_recipients`); `None` for an order placed before the checkout
    /// asked for one.
    email: Option<String>,
    shipping_address: Option<sqlx::types::Json<ShippingAddress>>,
}

/// An email ready to queue.
struct Confirmation {
    order_id: Uuid,
    recipient: String,
    subject: String,
    html: String,
    text: String,
}

/// Renders the confirmation of each shipped `(order, shipment label)` and queues them, in
/// three statements for the lot (once per order: a second queueing does nothing).
pub async fn queue_confirmations(
    tx: &mut PgConnection,
    shipments: &[(Uuid, String)],
) -> Result<(), HandlerError> {
    if shipments.is_empty() {
        return Ok(());
    }
    let orders: Vec<Uuid> = shipments.iter().map(|(order, _)| *order).collect();
    let facts: HashMap<Uuid, OrderFacts> = sqlx::query_as!(
        OrderFacts,
        r#"SELECT o.id, o.order_no, o.currency, o.total_cents, r.email AS "email?",
                  r.shipping_address AS "shipping_address?: sqlx::types::Json<ShippingAddress>"
             FROM orders o LEFT JOIN order_recipients_shown r ON r.order_id = o.id
            WHERE o.id = ANY($1)"#,
        &orders[..]
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|order| (order.id, order))
    .collect();
    let mut lines: HashMap<Uuid, Vec<Line>> = HashMap::new();
    for line in sqlx::query!(
        "SELECT order_id, name, quantity, unit_price_cents FROM order_items
          WHERE order_id = ANY($1) ORDER BY order_id, line_no",
        &orders[..]
    )
    .fetch_all(&mut *tx)
    .await?
    {
        let currency = &facts[&line.order_id].currency;
        lines.entry(line.order_id).or_default().push(Line {
            amount: format_money(line.unit_price_cents * i64::from(line.quantity), currency),
            name: line.name,
            quantity: line.quantity,
        });
    }
    let emails = shipments
        .iter()
        .map(|(order, shipment)| {
            let lines = lines.get(order).map(Vec::as_slice).unwrap_or_default();
            render(&facts[order], shipment, lines)
        })
        .collect::<Result<Vec<_>, askama::Error>>()
        .map_err(anyhow::Error::from)?;
    insert(tx, &emails).await?;
    Ok(())
}

fn render(
    order: &OrderFacts,
    shipment_no: &str,
    lines: &[Line],
) -> Result<Confirmation, askama::Error> {
    let total = format_money(order.total_cents, &order.currency);
    let subject = format!("Your order {} has shipped", order.order_no);
    let recipient = order
        .email
        .clone()
        .unwrap_or_else(|| unnamed_recipient(&order.order_no));
    let ship_to = order
        .shipping_address
        .as_ref()
        .map(|a| a.lines())
        .unwrap_or_default();
    let html = ConfirmationHtml {
        subject: &subject,
        recipient: &recipient,
        ship_to: &ship_to,
        order_no: &order.order_no,
        shipment_no,
        lines,
        total: &total,
    }
    .render()?;
    let text = ConfirmationText {
        order_no: &order.order_no,
        ship_to: &ship_to,
        shipment_no,
        lines,
        total: &total,
    }
    .render()?;
    Ok(Confirmation {
        order_id: order.id,
        recipient,
        subject,
        html,
        text,
    })
}

async fn insert(tx: &mut PgConnection, emails: &[Confirmation]) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = emails.iter().map(|_| Uuid::new_v4()).collect();
    let column = |f: fn(&Confirmation) -> &str| emails.iter().map(f).collect::<Vec<&str>>();
    let orders: Vec<Uuid> = emails.iter().map(|e| e.order_id).collect();
    sqlx::query!(
        "INSERT INTO emails (id, order_id, kind, recipient, subject, html_body, text_body)
         SELECT id, order_id, $3, recipient, subject, html_body, text_body
           FROM unnest($1::uuid[], $2::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])
             AS e (id, order_id, recipient, subject, html_body, text_body)
         ON CONFLICT ON CONSTRAINT emails_one_per_order_and_kind DO NOTHING",
        &ids[..],
        &orders[..],
        ORDER_CONFIRMATION,
        &column(|e| &e.recipient)[..] as &[&str],
        &column(|e| &e.subject)[..] as &[&str],
        &column(|e| &e.html)[..] as &[&str],
        &column(|e| &e.text)[..] as &[&str],
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The address of an order placed before the checkout asked for one: a mailbox of the
/// shop's test domain, never a person's.
fn unnamed_recipient(order_no: &str) -> String {
    format!("order-{}@shoppers.once.test", order_no.to_ascii_lowercase())
}
