use server::{
    config::Config,
    startup::{shutdown_signal, Application},
    telemetry,
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let config = Config::from_env()?;
    let app = Application::build(config).await?;
    app.run_until_stopped(shutdown_signal()).await?;
    Ok(())
}
