//! Verifying `Once-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`: within
//! 300 s of now (either way), compared in constant time, against every accepted secret (so
//! a secret can be rotated without losing callbacks).

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const TOLERANCE_SECS: i64 = 300;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Once-Signature header is missing")]
    Missing,
    #[error("the Once-Signature header is malformed")]
    Malformed,
    #[error("the signature's timestamp is more than 300 seconds away from now")]
    Stale,
    #[error("the signature does not match")]
    Mismatch,
}

pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &[String],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let (timestamp, signatures) = parse(header)?;
    if (now - timestamp).abs() > TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    let matches = |secret: &String, signature: &Vec<u8>| {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.verify_slice(signature).is_ok() // constant-time comparison
    };
    let ok = secrets
        .iter()
        .any(|secret| signatures.iter().any(|sig| matches(secret, sig)));
    if ok {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// `t=…` and every `v1=…` of the header.
fn parse(header: &str) -> Result<(i64, Vec<Vec<u8>>), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse().map_err(|_| SignatureError::Malformed)?),
            Some(("v1", hex_sig)) => {
                signatures.push(hex::decode(hex_sig).map_err(|_| SignatureError::Malformed)?)
            }
            _ => {}
        }
    }
    match (timestamp, signatures.is_empty()) {
        (Some(t), false) => Ok((t, signatures)),
        _ => Err(SignatureError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, t: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn a_valid_signature_from_any_accepted_secret_passes() {
        let secrets = vec!["old".to_owned(), "new".to_owned()];
        assert_eq!(
            verify(Some(&sign("new", 1000, b"{}")), b"{}", &secrets, 1000),
            Ok(())
        );
        assert_eq!(
            verify(Some(&sign("old", 1000, b"{}")), b"{}", &secrets, 1299),
            Ok(())
        );
    }

    #[test]
    fn tampering_wrong_secrets_and_stale_timestamps_fail() {
        let secrets = vec!["s".to_owned()];
        assert_eq!(
            verify(Some(&sign("s", 1000, b"{}")), b"{ }", &secrets, 1000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&sign("x", 1000, b"{}")), b"{}", &secrets, 1000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&sign("s", 1000, b"{}")), b"{}", &secrets, 1301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(Some(&sign("s", 1301, b"{}")), b"{}", &secrets, 1000),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(None, b"{}", &secrets, 1000),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(Some("t=abc,v1=00"), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(Some("t=1000"), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
    }
}
