//! Certificates made at run time for the TLS tests: a test CA the shop trusts through
//! `SSL_CERT_FILE` (the convention rustls's native roots share with OpenSSL), another it
//! does not, and server certificates signed by either.

use std::{path::PathBuf, sync::OnceLock};

use rcgen::{CertificateParams, DnType, IsCa, KeyPair};

/// The test CA the shop trusts, and another it does not; made once per test process.
pub struct Authorities {
    pub trusted: (rcgen::Certificate, KeyPair),
    pub stranger: (rcgen::Certificate, KeyPair),
    pub dir: PathBuf,
}

fn authority(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

/// The authorities, with `SSL_CERT_FILE` naming the trusted one's certificate: set once,
/// before any shop of this process builds its HTTP client (the other tests' calls are
/// plain HTTP on the loopback, which no root affects).
pub fn authorities() -> &'static Authorities {
    static MADE: OnceLock<Authorities> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("once-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trusted = authority("Once test CA");
        let bundle = dir.join("ca.pem");
        std::fs::write(&bundle, trusted.0.pem()).unwrap();
        std::env::set_var("SSL_CERT_FILE", &bundle);
        Authorities {
            trusted,
            stranger: authority("Someone else's CA"),
            dir,
        }
    })
}

/// A server certificate for `host`, signed by `by`: valid from 2020 on, and ended in 2021
/// when `expired`.
pub fn certificate(host: &str, by: &(rcgen::Certificate, KeyPair), expired: bool) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec![host.to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, host);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    if expired {
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let cert = params.signed_by(&key, &by.0, &by.1).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem())
}
