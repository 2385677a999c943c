//! Holding an order paid on money the provider did not take (docs/design.md,
//! "Reconciliation"): a success of ours whose charge the provider lists for another amount
//! (`amount_mismatch`) or does not know at all (`unknown_to_provider`). The finding is the
//! hold: fulfillment ships no order whose payment has one open (`fulfillment::held_orders`),
//! and an operator resolving it releases the order (`findings::resolve`).
//!
//! Both sides take the order's row lock first: the hold records its finding under it, and
//! fulfillment reads the findings after locking its orders. So a fulfillment either shipped
//! before the finding (which then says so) or sees it; and resolving takes the order first
//! too, so a hold and a release never wait for each other in a cycle.

use uuid::Uuid;

use super::{
    findings::{self, Finding},
    Reconciler,
};

impl Reconciler {
    /// Records `finding` about the success of `payment_id`, with the order's row locked, and
    /// says in its detail whether the order is held or had gone on before; true if new.
    pub(super) async fn hold(
        &self,
        run_id: Uuid,
        payment_id: Uuid,
        finding: Finding<'_>,
    ) -> Result<bool, sqlx::Error> {
        let mut tx = self.db.begin().await?;
        let order = sqlx::query!(
            r#"SELECT o.status,
                      EXISTS (SELECT 1 FROM fulfillments f WHERE f.order_id = o.id) AS "fulfilling!"
                 FROM orders o WHERE o.id = (SELECT order_id FROM payments WHERE id = $1)
                  FOR NO KEY UPDATE OF o"#,
            payment_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        let detail = match (order.status.as_str(), order.fulfilling) {
            ("paid", false) => format!(
                "{}: the order is held; it ships once this finding is resolved",
                finding.detail
            ),
            ("paid", true) => format!(
                "{}: the order is backordered, nothing shipped",
                finding.detail
            ),
            (status, _) => format!(
                "{}: the order was {status} before this was found",
                finding.detail
            ),
        };
        let new = findings::record(&mut *tx, run_id, Finding { detail, ..finding }).await?;
        tx.commit().await?;
        Ok(new)
    }
}
