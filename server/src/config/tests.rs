use super::*;

const SECRET: &str = "whsec_unit_test_secret";

fn config(vars: &[(&str, &str)]) -> anyhow::Result<Config> {
    Config::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
            .or_else(|| {
                matches!(
                    name,
                    "PROVIDER_WEBHOOK_SECRETS" | "IDEMPOTENCY_FINGERPRINT_SECRETS"
                )
                .then(|| SECRET.to_owned())
            })
    })
}

fn refusal(vars: &[(&str, &str)]) -> String {
    config(vars).expect_err("refused").to_string()
}

#[test]
fn the_defaults_are_valid() {
    let config = config(&[]).unwrap();
    assert_eq!(config.webhook_secrets, [SECRET]);
    assert_eq!(config.db_limits.statement_timeout, Duration::from_secs(10));
}

#[test]
fn there_is_no_built_in_webhook_secret() {
    let none = Config::from_vars(|_| None).unwrap_err().to_string();
    assert!(none.contains("PROVIDER_WEBHOOK_SECRETS"), "{none}");
    assert!(refusal(&[("PROVIDER_WEBHOOK_SECRETS", " , ")]).contains("not set"));
    assert!(refusal(&[("PROVIDER_WEBHOOK_SECRETS", "short")]).contains("16"));
}

#[test]
fn there_is_no_built_in_fingerprint_secret() {
    let none =
        Config::from_vars(|name| (name == "PROVIDER_WEBHOOK_SECRETS").then(|| SECRET.to_owned()))
            .unwrap_err()
            .to_string();
    assert!(none.contains("IDEMPOTENCY_FINGERPRINT_SECRETS"), "{none}");
    let short = refusal(&[(
        "IDEMPOTENCY_FINGERPRINT_SECRETS",
        &format!("{SECRET},short"),
    )]);
    assert!(short.contains("16"), "{short}");
}

#[test]
fn leases_the_heartbeat_cannot_keep_are_refused() {
    assert!(refusal(&[("IDEMPOTENCY_LEASE_MS", "100")]).contains("IDEMPOTENCY_LEASE_MS"));
    assert!(refusal(&[("IDEMPOTENCY_LEASE_MS", "3600000")]).contains("IDEMPOTENCY_LEASE_MS"));
    assert!(refusal(&[
        ("IDEMPOTENCY_LEASE_MS", "30000"),
        ("IDEMPOTENCY_RETENTION_SECS", "10")
    ])
    .contains("RETENTION"));
}

#[test]
fn a_settle_grace_shorter_than_a_charge_call_is_refused() {
    assert!(refusal(&[("PAYMENT_SETTLE_GRACE_MS", "15000")]).contains("PAYMENT_SETTLE_GRACE_MS"));
    assert!(refusal(&[("PROVIDER_TIMEOUT_MS", "0")]).contains("PROVIDER_TIMEOUT_MS"));
}

/// `server hash-password` for "correct horse".
const HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$64R7gJjVvOYW3AaD4IWcSQ$Bj69ipXeFP/sqoOEPN5tFLuPev4YI4HhcdKYq+cM1TM";

#[test]
fn a_password_hash_is_accepted_but_not_beside_a_password() {
    let config = config(&[("OPERATOR_PASSWORD_HASH", HASH)]).unwrap();
    let hash = config.operator_password_hash.as_deref().unwrap();
    assert!(crate::credentials::hash_matches(hash, "correct horse"));
    let both = refusal(&[
        ("OPERATOR_PASSWORD_HASH", HASH),
        ("OPERATOR_PASSWORD", "correct horse"),
    ]);
    assert!(both.contains("not both"), "{both}");
}

#[test]
fn a_malformed_password_hash_is_refused_at_start() {
    for bad in [
        "correct horse",
        // No hash; costs argon2 refuses; another algorithm.
        "$argon2id$v=19$m=19456,t=2,p=1$64R7gJjVvOYW3AaD4IWcSQ",
        "$argon2id$v=19$m=1,t=2,p=1$64R7gJjVvOYW3AaD4IWcSQ$Bj69ipXeFP/sqoOEPN5tFLuPev4YI4HhcdKYq+cM1TM",
        "$pbkdf2-sha256$i=1000$64R7gJjVvOYW3AaD4IWcSQ$Bj69ipXeFP/sqoOEPN5tFLuPev4YI4HhcdKYq+cM1TM",
    ] {
        let refused = refusal(&[("OPERATOR_PASSWORD_HASH", bad)]);
        assert!(refused.contains("OPERATOR_PASSWORD_HASH"), "{bad}: {refused}");
    }
}

#[test]
fn login_limits_that_lock_no_one_out_are_refused() {
    let defaults = config(&[]).unwrap().login_limits;
    assert_eq!(defaults.max_failures, 5);
    assert_eq!(defaults.lockout, Duration::from_secs(300));
    for bad in [
        ("OPERATOR_LOGIN_MAX_FAILURES", "0"),
        ("OPERATOR_LOGIN_GLOBAL_MAX_FAILURES", "0"),
        ("OPERATOR_LOCKOUT_MS", "0"),
        ("OPERATOR_LOGIN_GLOBAL_LOCKOUT_MS", "0"),
        ("OPERATOR_LOCKOUT_MS", "7200000"),
    ] {
        config(&[bad]).expect_err(bad.0);
    }
}

#[test]
fn a_short_metrics_token_is_refused() {
    assert!(refusal(&[("METRICS_TOKEN", "short")]).contains("METRICS_TOKEN"));
    assert!(config(&[("METRICS_TOKEN", "a-token-long-enough")]).is_ok());
}

#[test]
fn unbounded_or_inconsistent_database_waits_are_refused() {
    assert!(refusal(&[("DB_STATEMENT_TIMEOUT_MS", "0")]).contains("positive"));
    assert!(refusal(&[("DB_LOCK_TIMEOUT_MS", "20000")]).contains("DB_LOCK_TIMEOUT_MS"));
    assert!(refusal(&[("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "5000")])
        .contains("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS"));
}

#[test]
fn hashed_names_follow_hash_txt_unless_set_and_true_without_it_is_refused() {
    // The test binary has no hash.txt beside it.
    assert!(!config(&[]).unwrap().leptos.hash_files);
    assert!(
        !config(&[("LEPTOS_HASH_FILES", "false")])
            .unwrap()
            .leptos
            .hash_files
    );
    assert!(refusal(&[("LEPTOS_HASH_FILES", "true")]).contains("hash.txt"));
}
