//! The provider as a program: what it refuses to start without.

#[test]
fn the_provider_refuses_to_start_without_a_webhook_secret() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_provider"))
        .env_remove("PROVIDER_WEBHOOK_SECRET")
        .env("PROVIDER_ADDR", "127.0.0.1:0")
        .output()
        .expect("the provider binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PROVIDER_WEBHOOK_SECRET"), "{stderr}");
}

#[test]
fn the_provider_refuses_to_start_without_a_merchant_key() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_provider"))
        .env("PROVIDER_WEBHOOK_SECRET", "whsec_startup_test_secret")
        .env_remove("PROVIDER_API_KEY")
        .env("PROVIDER_ADDR", "127.0.0.1:0")
        .output()
        .expect("the provider binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PROVIDER_API_KEY"), "{stderr}");
}
