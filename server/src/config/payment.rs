//! Which payment provider the shop pays through (`PAYMENT_PROVIDER`), and Stripe's settings
//! (docs/payments.md, "Going live with Stripe").

/// The provider the payment flow talks to.
#[derive(Clone, Debug)]
pub enum ProviderChoice {
    /// The sandbox program of this repository (`PROVIDER_URL`), the default.
    Sandbox,
    /// Stripe's API.
    Stripe(StripeSettings),
}

/// How the shop reaches Stripe.
#[derive(Clone)]
pub struct StripeSettings {
    /// `STRIPE_API_BASE`: Stripe's own API, or a stand-in for tests.
    pub api_base: String,
    /// `STRIPE_SECRET_KEY` (`sk_…`): the server's calls.
    pub secret_key: String,
    /// `STRIPE_PUBLISHABLE_KEY` (`pk_…`): the browser's Stripe.js.
    pub publishable_key: String,
    /// `STRIPE_JS_URL`: where the checkout page loads Stripe.js from; the CSP names its
    /// origin and no other.
    pub js_url: String,
    /// `STRIPE_WEBHOOK_SECRETS` (`whsec_…`, comma-separated while one is rotated).
    pub webhook_secrets: Vec<String>,
}

/// The keys never appear in logs or panics.
impl std::fmt::Debug for StripeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeSettings")
            .field("api_base", &self.api_base)
            .field("js_url", &self.js_url)
            .finish_non_exhaustive()
    }
}

impl ProviderChoice {
    /// Reads `PAYMENT_PROVIDER` and, for Stripe, its variables; `secrets` splits a list.
    pub fn from_vars(
        var: &impl Fn(&str) -> Option<String>,
        secrets: &impl Fn(&str) -> Vec<String>,
    ) -> anyhow::Result<Self> {
        let var_or = |name: &str, default: &str| var(name).unwrap_or_else(|| default.to_owned());
        match var_or("PAYMENT_PROVIDER", "sandbox").as_str() {
            "sandbox" => Ok(Self::Sandbox),
            "stripe" => Ok(Self::Stripe(StripeSettings {
                api_base: var_or("STRIPE_API_BASE", "https://api.stripe.com"),
                secret_key: var_or("STRIPE_SECRET_KEY", ""),
                publishable_key: var_or("STRIPE_PUBLISHABLE_KEY", ""),
                js_url: var_or("STRIPE_JS_URL", "https://js.stripe.com/v3/"),
                webhook_secrets: secrets("STRIPE_WEBHOOK_SECRETS"),
            })),
            other => anyhow::bail!("PAYMENT_PROVIDER must be sandbox or stripe, not {other:?}"),
        }
    }

    /// Refuses a Stripe set-up that could not take or verify a payment; `https`: the shop is
    /// served over HTTPS (a browser would block Stripe.js over plain HTTP).
    pub fn validate(&self, sandbox_secrets: &[String], https: bool) -> anyhow::Result<()> {
        let Self::Stripe(stripe) = self else {
            anyhow::ensure!(
                !sandbox_secrets.is_empty(),
                "PROVIDER_WEBHOOK_SECRETS is not set: without a secret shared with the payment \
                 provider, callbacks cannot be verified (scripts/run generates one)"
            );
            anyhow::ensure!(
                sandbox_secrets.iter().all(|s| s.len() >= 16),
                "every PROVIDER_WEBHOOK_SECRETS entry must be at least 16 characters"
            );
            return Ok(());
        };
        anyhow::ensure!(
            stripe.secret_key.starts_with("sk_") || stripe.secret_key.starts_with("rk_"),
            "STRIPE_SECRET_KEY must be a secret (sk_…) or restricted (rk_…) key"
        );
        anyhow::ensure!(
            stripe.publishable_key.starts_with("pk_"),
            "STRIPE_PUBLISHABLE_KEY must be a publishable key (pk_…): Stripe.js needs it"
        );
        anyhow::ensure!(
            !stripe.webhook_secrets.is_empty()
                && stripe.webhook_secrets.iter().all(|s| s.len() >= 16),
            "STRIPE_WEBHOOK_SECRETS must hold the endpoint's signing secret (whsec_…)"
        );
        let live = |key: &str| key.split('_').nth(1) == Some("live");
        anyhow::ensure!(
            live(&stripe.secret_key) == live(&stripe.publishable_key),
            "STRIPE_SECRET_KEY and STRIPE_PUBLISHABLE_KEY must both be live keys or both test keys"
        );
        anyhow::ensure!(
            !https || stripe.js_url.starts_with("https://"),
            "STRIPE_JS_URL must be https:// on a shop served over HTTPS"
        );
        for (name, url) in [
            ("STRIPE_API_BASE", &stripe.api_base),
            ("STRIPE_JS_URL", &stripe.js_url),
        ] {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("{name} is not a URL: {e}"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some(),
                "{name} must be an http(s) URL"
            );
        }
        let base = reqwest::Url::parse(&stripe.api_base)?;
        anyhow::ensure!(
            base.scheme() == "https" || super::on_this_machine(&base),
            "STRIPE_API_BASE must be https:// (plain http only to this machine, for a stand-in \
             such as localstripe): the secret key goes with every call"
        );
        Ok(())
    }
}
