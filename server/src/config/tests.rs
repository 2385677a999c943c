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
                    "PROVIDER_WEBHOOK_SECRETS"
                        | "IDEMPOTENCY_FINGERPRINT_SECRETS"
                        | "PROVIDER_API_KEY"
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
fn there_is_no_built_in_provider_api_key() {
    assert!(refusal(&[("PROVIDER_API_KEY", "")]).contains("PROVIDER_API_KEY"));
    assert!(refusal(&[("PROVIDER_API_KEY", "short")]).contains("16"));
    let line_ending = refusal(&[("PROVIDER_API_KEY", "sk_sandbox_0123456789\r")]);
    assert!(line_ending.contains("printable ASCII"), "{line_ending}");
    // Stripe has keys of its own: the sandbox's is not asked for.
    let stripe = [
        ("PAYMENT_PROVIDER", "stripe"),
        ("PROVIDER_API_KEY", ""),
        ("STRIPE_SECRET_KEY", "sk_test_unit"),
        ("STRIPE_PUBLISHABLE_KEY", "pk_test_unit"),
        ("STRIPE_WEBHOOK_SECRETS", SECRET),
    ];
    assert!(config(&stripe).is_ok());
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

/// cargo-leptos names the file when it runs the server; its hashes are then read there.
#[test]
fn the_hash_file_named_by_cargo_leptos_is_the_one_read() {
    let names = std::env::temp_dir().join(format!("once_hashes_{}.txt", std::process::id()));
    std::fs::write(&names, "css: C\n").unwrap();
    let named = names.to_string_lossy().into_owned();
    let config = config(&[("LEPTOS_HASH_FILE_NAME", &named)]).unwrap();
    assert!(config.leptos.hash_files, "detected where it was named");
    assert_eq!(&*config.leptos.hash_file, named);
    let site = app::site_files::SiteFiles::of(&config.leptos);
    assert_eq!(site.stylesheet_href(), "/pkg/once.C.css");
    std::fs::remove_file(names).ok();
}

#[test]
fn headers_may_not_be_bounded_below_the_http_server_s_minimum() {
    assert!(refusal(&[("MAX_HEADER_BYTES", "4096")]).contains("MAX_HEADER_BYTES"));
    assert_eq!(config(&[]).unwrap().limits.max_header_bytes, 16384);
}

#[test]
fn waits_past_the_request_timeout_or_fallback_reads_too_often_are_refused() {
    let past = [("IDEMPOTENCY_WAIT_MAX_MS", "60000")];
    assert!(refusal(&past).contains("IDEMPOTENCY_WAIT_MAX_MS"));
    let busy = [("IDEMPOTENCY_WAIT_FALLBACK_MS", "1")];
    assert!(refusal(&busy).contains("IDEMPOTENCY_WAIT_FALLBACK_MS"));
    assert!(config(&[("IDEMPOTENCY_WAIT_FALLBACK_MS", "100")]).is_ok());
}

#[test]
fn stripe_needs_its_keys_of_one_mode_and_its_script_over_https_on_an_https_shop() {
    let stripe = [
        ("PAYMENT_PROVIDER", "stripe"),
        ("STRIPE_SECRET_KEY", "sk_test_1"),
        ("STRIPE_PUBLISHABLE_KEY", "pk_test_1"),
        ("STRIPE_WEBHOOK_SECRETS", SECRET),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut vars: Vec<(&str, &str)> = extra.to_vec();
        vars.extend(stripe);
        vars
    };
    assert!(matches!(
        config(&with(&[])).unwrap().payment_provider,
        ProviderChoice::Stripe(_)
    ));
    assert!(refusal(&with(&[("STRIPE_SECRET_KEY", "sk_live_1")])).contains("live keys"));
    assert!(refusal(&with(&[("STRIPE_SECRET_KEY", "pk_test_1")])).contains("STRIPE_SECRET_KEY"));
    assert!(refusal(&with(&[("STRIPE_WEBHOOK_SECRETS", "")])).contains("STRIPE_WEBHOOK_SECRETS"));
    let plain_js = [
        ("SERVED_OVER_HTTPS", "true"),
        ("STRIPE_JS_URL", "http://127.0.0.1:9/js.stripe.com/v3/"),
    ];
    assert!(refusal(&with(&plain_js)).contains("https://"));
    assert!(refusal(&[("PAYMENT_PROVIDER", "paypal")]).contains("sandbox or stripe"));
}

#[test]
fn stripe_is_called_over_https_unless_it_is_a_stand_in_on_this_machine() {
    let with_base = |base: &'static str| {
        [
            ("PAYMENT_PROVIDER", "stripe"),
            ("STRIPE_SECRET_KEY", "sk_test_1"),
            ("STRIPE_PUBLISHABLE_KEY", "pk_test_1"),
            ("STRIPE_WEBHOOK_SECRETS", SECRET),
            ("STRIPE_API_BASE", base),
        ]
    };
    for base in [
        "http://api.stripe.com",
        "http://10.0.0.5:12111",
        "http://[2001:db8::1]:80",
    ] {
        let refused = refusal(&with_base(base));
        assert!(
            refused.contains("STRIPE_API_BASE must be https://"),
            "{base}: {refused}"
        );
    }
    for base in [
        "https://api.stripe.com",
        "http://127.0.0.1:12111",
        "http://localhost:12111",
        "http://[::1]:12111",
    ] {
        assert!(config(&with_base(base)).is_ok(), "{base}");
    }
}

#[test]
fn smtp_url_says_how_the_relay_is_reached() {
    let relay = |url: &str| config(&[("SMTP_URL", url)]).unwrap().events.smtp.unwrap();
    let starttls = relay("smtp://shop%40example.com:p%3Ass@mail.example.com?tls=required");
    assert_eq!(
        (starttls.security, starttls.port, starttls.host.as_str()),
        (Security::StartTls, 587, "mail.example.com")
    );
    assert_eq!(
        starttls.login,
        Some(("shop@example.com".to_owned(), "p:ss".to_owned())),
        "the login is percent-decoded"
    );
    let tls = relay("smtps://shop:secret@mail.example.com");
    assert_eq!((tls.security, tls.port), (Security::Tls, 465));
    let catcher = relay("smtp://mailcatcher:1025");
    assert_eq!((catcher.security, catcher.login), (Security::Plain, None));
    assert!(
        !format!("{tls:?}").contains("secret"),
        "the password is not shown"
    );
    assert!(config(&[]).unwrap().events.smtp.is_none());
}

#[test]
fn a_password_never_goes_to_a_relay_in_clear() {
    for url in [
        "smtp://shop:secret@mail.example.com:587",
        "smtp://shop:secret@10.0.0.5",
        "smtp://shop@mail.example.com",
    ] {
        let refused = refusal(&[("SMTP_URL", url)]);
        assert!(refused.contains("in clear"), "{url}: {refused}");
    }
    for url in [
        "smtp://shop:secret@127.0.0.1:1025",
        "smtp://shop:secret@localhost:1025",
        "smtp://shop:secret@[::1]:1025",
    ] {
        assert!(config(&[("SMTP_URL", url)]).is_ok(), "{url}");
    }
    for (url, says) in [
        (
            "smtp://mail.example.com?tls=opportunistic",
            "tls=opportunistic",
        ),
        (
            "smtp://mail.example.com?tls=required&tls=required",
            "one setting",
        ),
        ("smtp://mail.example.com?port=2", "`port`"),
        ("http://mail.example.com", "not http://"),
        ("smtps://shop:secret@", "SMTP_URL"),
    ] {
        let refused = refusal(&[("SMTP_URL", url)]);
        assert!(refused.contains(says), "{url}: {refused}");
    }
}
