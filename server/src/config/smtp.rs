//! The relay the mailer sends through (`SMTP_URL`), read once at start. A relay on the
//! internet takes a login, and a login must never cross the network in clear, so the URL
//! says how the connection is protected and a password over plain SMTP is refused unless
//! the relay is this machine (docs/operations.md, "Mail").

use std::fmt;

use percent_encoding::percent_decode_str;

/// How the connection to the relay is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// `smtp://`: no encryption, for a mail catcher or a relay on the same host.
    Plain,
    /// `smtp://…?tls=required`: STARTTLS, and nothing is sent if the relay cannot do it.
    StartTls,
    /// `smtps://`: TLS from the first byte.
    Tls,
}

/// A parsed `SMTP_URL`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpRelay {
    /// The relay's host name, which its certificate must name when TLS is used.
    pub host: String,
    pub port: u16,
    pub security: Security,
    /// The login and password, decoded from the URL's user part.
    pub login: Option<(String, String)>,
}

impl SmtpRelay {
    /// Parses `smtp://[user:password@]host[:port][?tls=required]` or `smtps://…`.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let url =
            reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("SMTP_URL is not a URL: {e}"))?;
        let security = security(&url)?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| anyhow::anyhow!("SMTP_URL has no host"))?
            .trim_matches(|c| c == '[' || c == ']')
            .to_owned();
        let port = url.port().unwrap_or(match security {
            Security::Plain => 25,
            Security::StartTls => 587,
            Security::Tls => 465,
        });
        let login = login(&url)?;
        anyhow::ensure!(
            login.is_none() || security != Security::Plain || super::on_this_machine(&url),
            "SMTP_URL would send its password in clear to {host}: use smtps:// (TLS) or \
             smtp://…?tls=required (STARTTLS); plain SMTP with a login only to this machine"
        );
        Ok(Self {
            host,
            port,
            security,
            login,
        })
    }
}

fn security(url: &reqwest::Url) -> anyhow::Result<Security> {
    let mut tls = None;
    for (key, value) in url.query_pairs() {
        anyhow::ensure!(
            key == "tls" && tls.is_none(),
            "SMTP_URL takes one setting, tls=required; `{key}` is not one"
        );
        tls = Some(value.into_owned());
    }
    match (url.scheme(), tls.as_deref()) {
        ("smtp", None) => Ok(Security::Plain),
        ("smtp", Some("required")) => Ok(Security::StartTls),
        ("smtps", None) => Ok(Security::Tls),
        // Opportunistic STARTTLS falls back to clear text when an attacker strips the
        // relay's offer, so it is not offered here.
        ("smtp", Some(other)) => anyhow::bail!(
            "SMTP_URL's tls={other} is not supported: tls=required, or smtps:// for TLS"
        ),
        (scheme, _) => anyhow::bail!(
            "SMTP_URL must be smtp://host[:port][?tls=required] or smtps://host[:port], \
             not {scheme}://"
        ),
    }
}

fn login(url: &reqwest::Url) -> anyhow::Result<Option<(String, String)>> {
    if url.username().is_empty() && url.password().is_none() {
        return Ok(None);
    }
    let decode = |part: &str| {
        percent_decode_str(part)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| anyhow::anyhow!("SMTP_URL's login is not UTF-8 once decoded"))
    };
    Ok(Some((
        decode(url.username())?,
        decode(url.password().unwrap_or_default())?,
    )))
}

/// Shown in the start-up log and in errors without its password.
impl fmt::Debug for SmtpRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpRelay")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("login", &self.login.as_ref().map(|(user, _)| user))
            .finish()
    }
}
