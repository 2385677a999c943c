use provider::{config::Config, startup::Application};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
    let app = Application::build(Config::from_env()?).await?;
    app.run_until_stopped(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
