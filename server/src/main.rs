//! `server`: the HTTP server, with the workers as tasks inside it (unless `RUN_WORKERS=none`).
//! `server worker relay|fulfillment|mailer …`: those workers alone, for scaling them apart.
//! `server dead-letters list|retry <id>|discard <id>`: operators' handling of dead letters.
//! `server hash-password`: the argon2 hash of the password on stdin, for
//! `OPERATOR_PASSWORD_HASH`.
//! `server operator-browser`: a link that lets a new browser into the console's login
//! through every lock.

use server::{
    cli,
    config::Config,
    startup::{shutdown_signal, Application},
    telemetry,
};

/// mimalloc: with the system allocator, malloc and free took about an eighth of a replay's
/// time (docs/figures.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Needs no configuration: it runs on a machine with none.
    if args.first().map(String::as_str) == Some("hash-password") {
        println!("{}", cli::hash_password(std::io::stdin().lock())?);
        return Ok(());
    }
    let config = Config::from_env()?;
    match args.first().map(String::as_str) {
        None => {
            let app = Application::build(config).await?;
            app.run_until_stopped(shutdown_signal()).await?;
        }
        Some("worker") => cli::run_workers(config, &args[1..], shutdown_signal()).await?,
        Some("dead-letters") => cli::dead_letters(config, &args[1..]).await?,
        Some("operator-browser") => cli::operator_browser(config).await?,
        Some(other) => anyhow::bail!(
            "unknown command {other}: try `worker`, `dead-letters`, `operator-browser` or \
             `hash-password`"
        ),
    }
    Ok(())
}
