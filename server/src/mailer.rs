//! The mailer: delivers each queued email once. It claims one email at a time with `FOR
//! UPDATE SKIP LOCKED`, right before sending it, and pushes its next attempt out by a lease
//! while it sends, so two mailers never send the same email at the same time. The marks that
//! follow are fenced on the claim (`attempts`): a mailer whose lease ran out cannot overwrite
//! what the next one did. With `SMTP_URL` set it sends over SMTP (lettre; STARTTLS or TLS
//! with a login to a real relay) and marks the email `sent`; a failed send, a certificate
//! that does not verify included, leaves it queued for a later try. Without `SMTP_URL` the
//! email is `kept` in the database, where the shopper's order page shows it. A mailer killed
//! between the SMTP send and the mark sends the email again after the lease: the Message-ID
//! is derived from the email's id, so the resend is recognisable as the same message.

use std::{sync::Arc, time::Duration};

use lettre::{
    message::{header::ContentType, Mailbox, MultiPart, SinglePart},
    transport::smtp::{
        authentication::Credentials,
        client::{Tls, TlsParameters},
    },
    AsyncSmtpTransport, AsyncTransport, Tokio1Executor,
};
use once_events::wake::Wakeup;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    config::{Security, SmtpRelay},
    metrics::Metrics,
};

/// Emails sent per step, each claimed just before it is sent.
const BATCH: usize = 20;
/// How long a claimed email is left to its mailer before another may send it.
const LEASE: Duration = Duration::from_secs(60);
/// Waits between failed sends: 10 s, 20 s, 40 s … up to an hour.
const RETRY_BASE: Duration = Duration::from_secs(10);
const RETRY_CAP: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub struct Mailer {
    pub db: PgPool,
    pub smtp: Option<AsyncSmtpTransport<Tokio1Executor>>,
    pub from: Mailbox,
    pub metrics: Arc<Metrics>,
}

struct Outgoing {
    id: Uuid,
    recipient: String,
    subject: String,
    html_body: String,
    text_body: String,
    attempts: i32,
}

impl Mailer {
    pub fn new(
        db: PgPool,
        relay: Option<&SmtpRelay>,
        from: &str,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let smtp = relay.map(smtp_transport).transpose()?;
        Ok(Self {
            db,
            smtp,
            from: from.parse()?,
            metrics,
        })
    }

    /// Delivers up to a batch of emails; returns how many it tried.
    pub async fn try_execute_task(&self) -> anyhow::Result<usize> {
        let mut tried = 0;
        while tried < BATCH {
            let Some(email) = self.claim_one().await? else {
                break;
            };
            tried += 1;
            match self.deliver(&email).await {
                Ok(status) => self.mark_delivered(&email, status).await?,
                Err(e) => self.mark_failed(&email, &format!("{e:#}")).await?,
            }
        }
        Ok(tried)
    }

    /// The next queued email whose time has come, leased to this mailer.
    async fn claim_one(&self) -> Result<Option<Outgoing>, sqlx::Error> {
        sqlx::query_as!(
            Outgoing,
            "UPDATE emails SET attempts = attempts + 1, next_attempt_at = now() + $1
              WHERE id = (SELECT id FROM emails
                           WHERE status = 'queued' AND next_attempt_at <= now()
                           ORDER BY next_attempt_at LIMIT 1
                             FOR UPDATE SKIP LOCKED)
          RETURNING id, recipient, subject, html_body, text_body, attempts",
            // A std Duration encodes as an interval; the macro would insist on PgInterval.
            LEASE as _,
        )
        .fetch_optional(&self.db)
        .await
    }

    async fn deliver(&self, email: &Outgoing) -> anyhow::Result<&'static str> {
        let Some(smtp) = &self.smtp else {
            return Ok("kept");
        };
        let message = lettre::Message::builder()
            .message_id(Some(message_id(email.id)))
            .from(self.from.clone())
            .to(email.recipient.parse()?)
            .subject(&email.subject)
            .multipart(
                MultiPart::alternative()
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_PLAIN)
                            .body(email.text_body.clone()),
                    )
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_HTML)
                            .body(email.html_body.clone()),
                    ),
            )?;
        smtp.send(message).await?;
        Ok("sent")
    }

    async fn mark_delivered(&self, email: &Outgoing, status: &str) -> Result<(), sqlx::Error> {
        sqlx::query!(
            "UPDATE emails SET status = $3, delivered_at = now(), last_error = NULL
              WHERE id = $1 AND attempts = $2 AND status = 'queued'",
            email.id,
            email.attempts,
            status,
        )
        .execute(&self.db)
        .await?;
        Metrics::inc(&self.metrics.emails_delivered);
        Ok(())
    }

    async fn mark_failed(&self, email: &Outgoing, error: &str) -> Result<(), sqlx::Error> {
        // The error's text stays with the email (`last_error`, forgotten with the order's
        // personal data): a relay's refusal often names the recipient, and the log keeps
        // no address (docs/operations.md, "Personal data").
        tracing::warn!(email = %email.id, attempts = email.attempts, "sending an email failed; trying again later");
        let wait = RETRY_BASE
            .saturating_mul(2u32.saturating_pow(email.attempts.max(1) as u32 - 1))
            .min(RETRY_CAP);
        sqlx::query!(
            "UPDATE emails SET last_error = $3, next_attempt_at = now() + $4
              WHERE id = $1 AND attempts = $2 AND status = 'queued'",
            email.id,
            email.attempts,
            error,
            wait as _,
        )
        .execute(&self.db)
        .await?;
        Ok(())
    }

    /// Delivers until `stop`: woken by new emails, polling every `poll`.
    pub async fn run(self, poll: Duration, stop: CancellationToken) {
        let mut wakeup = Wakeup::new(self.db.clone(), "emails", poll);
        while !stop.is_cancelled() {
            match self.try_execute_task().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "mailer step failed; trying again")
                }
            }
            tokio::select! {
                _ = wakeup.wait(poll) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}

/// A transport to `relay`, protected as its URL says. TLS certificates are verified with
/// the system's roots, or the bundle `SSL_CERT_FILE` names; a relay whose certificate does
/// not verify gets nothing, and the email stays queued for the next try.
fn smtp_transport(relay: &SmtpRelay) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    let tls = || TlsParameters::new(relay.host.clone());
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&relay.host)
        .port(relay.port)
        .timeout(Some(Duration::from_secs(10)));
    builder = match relay.security {
        Security::Plain => builder,
        Security::StartTls => builder.tls(Tls::Required(tls()?)),
        Security::Tls => builder.tls(Tls::Wrapper(tls()?)),
    };
    if let Some((user, password)) = &relay.login {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    Ok(builder.build())
}

/// The Message-ID of an email: the same for every send of it.
pub fn message_id(email_id: Uuid) -> String {
    format!("<{email_id}@once.test>")
}
