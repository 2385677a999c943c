//! The commands besides serving: workers on their own, dead-letter handling, the operator
//! password's hash, and a link that lets a new browser into the console.

use std::{future::Future, io::Read, sync::Arc};

use once_events::{bus, dead_letters, Handler};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{config::Config, credentials, db, fulfillment::Fulfillment, metrics::Metrics, workers};

async fn database(config: &Config) -> anyhow::Result<PgPool> {
    db::ensure_database(&config.database_url).await?;
    let db = db::connect(
        &config.database_url,
        &config.db_limits,
        db::ServerWatch::default(),
    )
    .await?;
    db::migrate(&db).await?;
    Ok(db)
}

/// `server worker relay fulfillment …`: runs the named workers until `shutdown`, then lets
/// each finish the message in hand.
pub async fn run_workers(
    config: Config,
    names: &[String],
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let chosen: Vec<workers::Worker> = names
        .iter()
        .map(|n| n.parse())
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(
        !chosen.is_empty(),
        "name the workers to run: relay, fulfillment, mailer, reconciler"
    );
    let db = database(&config).await?;
    let context = workers::Context {
        bus: bus::connect(&config.events.bus(), &db).await?,
        db,
        config,
        metrics: Arc::new(Metrics::default()),
    };
    let stop = CancellationToken::new();
    let handles = workers::spawn(&context, &chosen, &stop).await?;
    shutdown.await;
    stop.cancel();
    futures::future::join_all(handles).await;
    Ok(())
}

/// `server dead-letters list`, `… retry <id>`, `… discard <id>`.
pub async fn dead_letters(config: Config, args: &[String]) -> anyhow::Result<()> {
    let db = database(&config).await?;
    let id = || -> anyhow::Result<Uuid> {
        let raw = args
            .get(1)
            .ok_or_else(|| anyhow::anyhow!("give the dead letter's id"))?;
        Ok(Uuid::parse_str(raw)?)
    };
    match args.first().map(String::as_str) {
        Some("list") | None => {
            for letter in dead_letters::list(&db).await? {
                println!("{}", serde_json::to_string(&letter)?);
            }
        }
        Some("retry") => {
            let handler: Arc<dyn Handler> = Arc::new(Fulfillment);
            let handled = dead_letters::retry(&db, &handler, id()?).await?;
            println!("retried: {handled:?}");
        }
        Some("discard") => {
            anyhow::ensure!(
                dead_letters::discard(&db, id()?).await?,
                "no such dead letter waiting"
            );
            println!("discarded");
        }
        Some(other) => anyhow::bail!("unknown dead-letters command {other}: list, retry, discard"),
    }
    Ok(())
}

/// `server operator-browser`: a link that lets the browser that opens it in through every
/// lock on the console's login (the password is still needed), for an operator on a
/// browser never used before while logins are locked (docs/design.md, "The operator
/// console").
pub async fn operator_browser(config: Config) -> anyhow::Result<()> {
    // A browser is known under the password as configured: one the server makes for a run
    // of its own is not in this command's configuration, and the link would name nothing.
    anyhow::ensure!(
        config.operator_password.is_some() || config.operator_password_hash.is_some(),
        "run it with the server's OPERATOR_PASSWORD or OPERATOR_PASSWORD_HASH: a browser is \
         known under the password the server checks"
    );
    let db = database(&config).await?;
    let secret = crate::operator::enrol_browser(&db, &config).await?;
    println!(
        "Open /operator/login?browser={secret} on the shop's address within {} minutes, in \
         the browser to let in, and press \"Let this browser in\" (the link lets in the \
         first browser that presses it, and no other); then log in there with the password.",
        crate::operator::BROWSER_LINK_MINUTES
    );
    Ok(())
}

/// `server hash-password`: the argon2 PHC string of the password read from `input` (one
/// line; its line ending is not part of it), for `OPERATOR_PASSWORD_HASH`.
pub fn hash_password(mut input: impl Read) -> anyhow::Result<String> {
    let mut text = String::new();
    input.read_to_string(&mut text)?;
    let password = text
        .strip_suffix('\n')
        .map(|p| p.strip_suffix('\r').unwrap_or(p))
        .unwrap_or(&text);
    anyhow::ensure!(
        !password.is_empty(),
        "give the password on stdin, e.g. `printf %s \"$PASSWORD\" | server hash-password`"
    );
    credentials::hash_password(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_of_the_line_without_its_ending() {
        for input in ["correct horse", "correct horse\n", "correct horse\r\n"] {
            let hash = hash_password(input.as_bytes()).unwrap();
            let config = Config {
                operator_password_hash: Some(hash),
                ..Config::from_vars(|name| {
                    (name.ends_with("SECRETS") || name == "PROVIDER_API_KEY")
                        .then(|| "a-secret-long-enough".to_owned())
                })
                .unwrap()
            };
            assert!(
                crate::operator::auth::password_ok(&config, "correct horse"),
                "{input:?}"
            );
        }
        assert!(hash_password("\n".as_bytes()).is_err());
    }
}
